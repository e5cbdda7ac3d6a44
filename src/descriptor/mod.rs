//! Descriptors: the typed, denormalised payload of an action.
//!
//! Each descriptor is one struct that is at once the stored form, the GraphQL
//! output object and the GraphQL input object. Adding a type is one struct in a
//! family file and one line in the `descriptors!` list below, which generates the
//! `Descriptor` union, the `@oneOf` `DescriptorInput` and the conversions.

mod recruiting;
mod social;

use async_graphql::{OneofObject, Union};
use serde::{Deserialize, Serialize};

pub use recruiting::{ApplicantHired, ApplicantRatingRequested, ApplicationRating, NewApplicant};
pub use social::StatusPost;

use crate::model::limits::{check_text, normalize_id_in, InputError};

/// Validation every descriptor runs before its action is stored.
pub trait Validate {
    /// Checks the descriptor, and puts its ids in their one form.
    fn validate(&mut self) -> Result<(), InputError>;

    /// Fields that say who did the thing (`raterId`, `hiredById`…), as
    /// `(field, user id)`: a user recording for itself must be the one named.
    fn done_by(&self) -> Vec<(&'static str, &str)> {
        Vec::new()
    }

    /// The pairs of an id and the name copied next to it (`applicantId` and
    /// `applicantName`…), by their stored field names.
    fn named_refs(&mut self) -> Vec<NamedRef<'_>> {
        Vec::new()
    }
}

/// An id in a descriptor and the display name copied beside it.
pub struct NamedRef<'a> {
    pub id_field: &'static str,
    pub name_field: &'static str,
    pub id: &'a str,
    pub name: &'a mut String,
}

/// Every `(id field, name field)` pair any descriptor type has, for backends
/// that rename in place (MongoDB's `updateMany` per pair).
pub const NAMED_REF_FIELDS: &[(&str, &str)] = &[
    ("applicantId", "applicantName"),
    ("positionId", "positionName"),
    ("raterId", "raterName"),
    ("hiredById", "hiredByName"),
    ("requestedById", "requestedByName"),
];

macro_rules! descriptors {
    ($($variant:ident),+ $(,)?) => {
        /// What happened, as a tagged union (`type` names the variant when stored).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Union)]
        #[serde(tag = "type")]
        pub enum Descriptor {
            $($variant($variant),)+
        }

        /// Exactly one descriptor to record.
        #[derive(Clone, Debug, OneofObject)]
        pub enum DescriptorInput {
            $($variant($variant),)+
        }

        impl From<DescriptorInput> for Descriptor {
            fn from(input: DescriptorInput) -> Self {
                match input {
                    $(DescriptorInput::$variant(d) => Descriptor::$variant(d),)+
                }
            }
        }

        impl Descriptor {
            /// The stored type tag, e.g. `"ApplicationRating"`.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $(Descriptor::$variant(_) => stringify!($variant),)+
                }
            }

            pub fn validate(&mut self) -> Result<(), InputError> {
                match self {
                    $(Descriptor::$variant(d) => d.validate(),)+
                }
            }

            /// Sets the copied name of `ref_id` to `name` wherever this
            /// descriptor refers to it. Returns how many names changed.
            pub fn rename(&mut self, ref_id: &str, name: &str) -> usize {
                let refs = match self {
                    $(Descriptor::$variant(d) => d.named_refs(),)+
                };
                let mut changed = 0;
                for r in refs {
                    if r.id == ref_id && r.name != name {
                        *r.name = name.to_owned();
                        changed += 1;
                    }
                }
                changed
            }

            /// Fields naming who did the thing, as `(field, user id)`.
            pub fn done_by(&self) -> Vec<(&'static str, &str)> {
                match self {
                    $(Descriptor::$variant(d) => d.done_by(),)+
                }
            }
        }
    };
}

descriptors!(
    StatusPost,
    ApplicationRating,
    NewApplicant,
    ApplicantHired,
    ApplicantRatingRequested,
);

/// Checks an id field of a descriptor, putting it in its one form.
pub(crate) fn id(field: &str, value: &mut String) -> Result<(), InputError> {
    normalize_id_in(field, value)
}

/// Checks a text field of a descriptor.
pub(crate) fn text(field: &str, value: &str) -> Result<(), InputError> {
    check_text(field, value)
}
