//! A plan's arguments bound to a request's variables, coerced as
//! async-graphql coerces them; what would not coerce leaves the request to
//! async-graphql ([`Fallback`]).

use async_graphql::resolver_utils::EnumType;
use async_graphql::{Variables, ID};
use async_graphql_value::ConstValue;

use super::compile::{Arg, Scope};

/// The plan cannot answer this request as async-graphql would (a variable
/// that does not coerce, say): async-graphql runs it instead.
#[derive(Debug)]
pub struct Fallback;

/// Arguments bound to the request's variables, coerced as async-graphql
/// coerces them; anything else is left to it.
pub(super) struct Bind<'a> {
    pub(super) scope: &'a Scope,
    variables: &'a Variables,
}

impl<'a> Bind<'a> {
    pub(super) fn new(scope: &'a Scope, variables: &'a Variables) -> Self {
        Self { scope, variables }
    }
}

impl Bind<'_> {
    pub(super) fn value<'v>(&'v self, arg: &'v Arg) -> Result<Option<&'v ConstValue>, Fallback> {
        match arg {
            Arg::Absent => Ok(None),
            Arg::Literal(value) => Ok(Some(value)),
            Arg::Variable(name) => match self.variables.get(name) {
                Some(value) => Ok(Some(value)),
                None => self
                    .scope
                    .variables
                    .iter()
                    .find(|v| &v.name.node == name)
                    .and_then(|v| v.default_value())
                    .map(Some)
                    .ok_or(Fallback),
            },
        }
    }

    pub(super) fn int(&self, arg: &Arg) -> Result<Option<i32>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Ok(None),
            Some(ConstValue::Number(n)) => n
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .map(Some)
                .ok_or(Fallback),
            Some(_) => Err(Fallback),
        }
    }

    pub(super) fn string(&self, arg: &Arg) -> Result<Option<String>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Ok(None),
            Some(ConstValue::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Fallback),
        }
    }

    pub(super) fn bool(&self, arg: &Arg) -> Result<Option<bool>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Ok(None),
            Some(ConstValue::Boolean(b)) => Ok(Some(*b)),
            Some(_) => Err(Fallback),
        }
    }

    /// A list of an enum's values, `None` when not given; one value alone
    /// is a list of one, as input coercion says.
    pub(super) fn enums<E: EnumType>(&self, arg: &Arg) -> Result<Option<Vec<E>>, Fallback> {
        let values = match self.value(arg)? {
            None | Some(ConstValue::Null) => return Ok(None),
            Some(ConstValue::List(items)) => items
                .iter()
                .map(|v| enumerated(Some(v)))
                .collect::<Result<_, _>>()?,
            Some(value) => vec![enumerated(Some(value))?],
        };
        Ok(Some(values))
    }

    pub(super) fn id(&self, arg: &Arg) -> Result<Option<ID>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Ok(None),
            Some(value) => Self::one_id(value).map(Some),
        }
    }

    /// A list of ids; one id alone is a list of one, as input coercion says.
    pub(super) fn ids(&self, arg: &Arg) -> Result<Vec<ID>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Err(Fallback),
            Some(ConstValue::List(items)) => items.iter().map(Self::one_id).collect(),
            Some(value) => Ok(vec![Self::one_id(value)?]),
        }
    }

    fn one_id(value: &ConstValue) -> Result<ID, Fallback> {
        match value {
            ConstValue::String(s) => Ok(ID(s.clone())),
            ConstValue::Number(n) if n.is_i64() || n.is_u64() => Ok(ID(n.to_string())),
            _ => Err(Fallback),
        }
    }
}

/// An enum argument as async-graphql takes it: its name, in the document
/// or in the variables.
pub(super) fn enumerated<E: EnumType>(value: Option<&ConstValue>) -> Result<E, Fallback> {
    let name = match value {
        Some(ConstValue::Enum(name)) => name.as_str(),
        Some(ConstValue::String(name)) => name.as_str(),
        _ => return Err(Fallback),
    };
    E::items()
        .iter()
        .find(|item| item.name == name)
        .map(|item| item.value)
        .ok_or(Fallback)
}
