//! Social descriptors: things people say.

use async_graphql::{InputObject, SimpleObject};
use serde::{Deserialize, Serialize};

use super::{text, Validate};
use crate::model::limits::InputError;

/// A free-text status update.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, SimpleObject, InputObject)]
#[graphql(input_name = "StatusPostInput")]
#[serde(rename_all = "camelCase")]
pub struct StatusPost {
    pub text: String,
}

impl Validate for StatusPost {
    fn validate(&mut self) -> Result<(), InputError> {
        if self.text.trim().is_empty() {
            return Err(InputError::new("statusPost.text must not be empty"));
        }
        text("statusPost.text", &self.text)
    }
}
