//! Recruiting descriptors: applicants, positions, ratings and hires.
//!
//! Names (`applicantName`, `positionName`, …) are copied into the descriptor when the
//! action is recorded, so a feed page renders without looking anything else up.

use async_graphql::{InputObject, SimpleObject};
use serde::{Deserialize, Serialize};

use super::{id, text, NamedRef, Validate};
use crate::model::limits::{normalize_ids, InputError};

/// Someone rated an applicant for a position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, SimpleObject, InputObject)]
#[graphql(input_name = "ApplicationRatingInput")]
#[serde(rename_all = "camelCase")]
pub struct ApplicationRating {
    pub rater_id: String,
    pub rater_name: String,
    pub position_id: String,
    pub position_name: String,
    pub applicant_id: String,
    pub applicant_name: String,
    /// From 0 to 5.
    pub rating_score: f64,
    #[graphql(default)]
    pub rating_text: String,
    #[graphql(default)]
    pub tags: Vec<String>,
}

impl Validate for ApplicationRating {
    fn validate(&mut self) -> Result<(), InputError> {
        id("applicationRating.raterId", &mut self.rater_id)?;
        id("applicationRating.positionId", &mut self.position_id)?;
        id("applicationRating.applicantId", &mut self.applicant_id)?;
        text("applicationRating.raterName", &self.rater_name)?;
        text("applicationRating.positionName", &self.position_name)?;
        text("applicationRating.applicantName", &self.applicant_name)?;
        text("applicationRating.ratingText", &self.rating_text)?;
        if !(0.0..=5.0).contains(&self.rating_score) {
            return Err(InputError::new(format!(
                "applicationRating.ratingScore must be between 0 and 5, got {}",
                self.rating_score
            )));
        }
        self.tags = normalize_ids("applicationRating.tags", std::mem::take(&mut self.tags))?;
        Ok(())
    }

    fn done_by(&self) -> Vec<(&'static str, &str)> {
        vec![("applicationRating.raterId", &self.rater_id)]
    }

    fn named_refs(&mut self) -> Vec<NamedRef<'_>> {
        vec![
            named("raterId", "raterName", &self.rater_id, &mut self.rater_name),
            named(
                "positionId",
                "positionName",
                &self.position_id,
                &mut self.position_name,
            ),
            named(
                "applicantId",
                "applicantName",
                &self.applicant_id,
                &mut self.applicant_name,
            ),
        ]
    }
}

/// An applicant applied for a position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, SimpleObject, InputObject)]
#[graphql(input_name = "NewApplicantInput")]
#[serde(rename_all = "camelCase")]
pub struct NewApplicant {
    pub applicant_id: String,
    pub applicant_name: String,
    pub position_id: String,
    pub position_name: String,
}

impl Validate for NewApplicant {
    fn validate(&mut self) -> Result<(), InputError> {
        id("newApplicant.applicantId", &mut self.applicant_id)?;
        id("newApplicant.positionId", &mut self.position_id)?;
        text("newApplicant.applicantName", &self.applicant_name)?;
        text("newApplicant.positionName", &self.position_name)
    }

    fn named_refs(&mut self) -> Vec<NamedRef<'_>> {
        vec![
            named(
                "applicantId",
                "applicantName",
                &self.applicant_id,
                &mut self.applicant_name,
            ),
            named(
                "positionId",
                "positionName",
                &self.position_id,
                &mut self.position_name,
            ),
        ]
    }
}

/// An applicant was hired for a position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, SimpleObject, InputObject)]
#[graphql(input_name = "ApplicantHiredInput")]
#[serde(rename_all = "camelCase")]
pub struct ApplicantHired {
    pub applicant_id: String,
    pub applicant_name: String,
    pub position_id: String,
    pub position_name: String,
    pub hired_by_id: String,
    pub hired_by_name: String,
}

impl Validate for ApplicantHired {
    fn validate(&mut self) -> Result<(), InputError> {
        id("applicantHired.applicantId", &mut self.applicant_id)?;
        id("applicantHired.positionId", &mut self.position_id)?;
        id("applicantHired.hiredById", &mut self.hired_by_id)?;
        text("applicantHired.applicantName", &self.applicant_name)?;
        text("applicantHired.positionName", &self.position_name)?;
        text("applicantHired.hiredByName", &self.hired_by_name)
    }

    fn done_by(&self) -> Vec<(&'static str, &str)> {
        vec![("applicantHired.hiredById", &self.hired_by_id)]
    }

    fn named_refs(&mut self) -> Vec<NamedRef<'_>> {
        vec![
            named(
                "applicantId",
                "applicantName",
                &self.applicant_id,
                &mut self.applicant_name,
            ),
            named(
                "positionId",
                "positionName",
                &self.position_id,
                &mut self.position_name,
            ),
            named(
                "hiredById",
                "hiredByName",
                &self.hired_by_id,
                &mut self.hired_by_name,
            ),
        ]
    }
}

/// Someone was asked to rate an applicant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, SimpleObject, InputObject)]
#[graphql(input_name = "ApplicantRatingRequestedInput")]
#[serde(rename_all = "camelCase")]
pub struct ApplicantRatingRequested {
    pub applicant_id: String,
    pub applicant_name: String,
    pub position_id: String,
    pub position_name: String,
    pub rater_id: String,
    pub rater_name: String,
    pub requested_by_id: String,
    pub requested_by_name: String,
}

impl Validate for ApplicantRatingRequested {
    fn validate(&mut self) -> Result<(), InputError> {
        id(
            "applicantRatingRequested.applicantId",
            &mut self.applicant_id,
        )?;
        id("applicantRatingRequested.positionId", &mut self.position_id)?;
        id("applicantRatingRequested.raterId", &mut self.rater_id)?;
        id(
            "applicantRatingRequested.requestedById",
            &mut self.requested_by_id,
        )?;
        text(
            "applicantRatingRequested.applicantName",
            &self.applicant_name,
        )?;
        text("applicantRatingRequested.positionName", &self.position_name)?;
        text("applicantRatingRequested.raterName", &self.rater_name)?;
        text(
            "applicantRatingRequested.requestedByName",
            &self.requested_by_name,
        )
    }

    fn done_by(&self) -> Vec<(&'static str, &str)> {
        vec![(
            "applicantRatingRequested.requestedById",
            &self.requested_by_id,
        )]
    }

    fn named_refs(&mut self) -> Vec<NamedRef<'_>> {
        vec![
            named(
                "applicantId",
                "applicantName",
                &self.applicant_id,
                &mut self.applicant_name,
            ),
            named(
                "positionId",
                "positionName",
                &self.position_id,
                &mut self.position_name,
            ),
            named("raterId", "raterName", &self.rater_id, &mut self.rater_name),
            named(
                "requestedById",
                "requestedByName",
                &self.requested_by_id,
                &mut self.requested_by_name,
            ),
        ]
    }
}

fn named<'a>(
    id_field: &'static str,
    name_field: &'static str,
    id: &'a str,
    name: &'a mut String,
) -> NamedRef<'a> {
    NamedRef {
        id_field,
        name_field,
        id,
        name,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::descriptor::{Descriptor, NAMED_REF_FIELDS};

    /// MongoDB renames by the field list; every type's pairs must be in it,
    /// and it must hold nothing no type has.
    #[test]
    fn the_rename_field_list_matches_the_descriptor_types() {
        let s = || String::from("x");
        let mut rating = ApplicationRating {
            rater_id: s(),
            rater_name: s(),
            position_id: s(),
            position_name: s(),
            applicant_id: s(),
            applicant_name: s(),
            rating_score: 1.0,
            rating_text: s(),
            tags: vec![],
        };
        let mut applied = NewApplicant {
            applicant_id: s(),
            applicant_name: s(),
            position_id: s(),
            position_name: s(),
        };
        let mut hired = ApplicantHired {
            applicant_id: s(),
            applicant_name: s(),
            position_id: s(),
            position_name: s(),
            hired_by_id: s(),
            hired_by_name: s(),
        };
        let mut requested = ApplicantRatingRequested {
            applicant_id: s(),
            applicant_name: s(),
            position_id: s(),
            position_name: s(),
            rater_id: s(),
            rater_name: s(),
            requested_by_id: s(),
            requested_by_name: s(),
        };
        let mut pairs = BTreeSet::new();
        for refs in [
            rating.named_refs(),
            applied.named_refs(),
            hired.named_refs(),
            requested.named_refs(),
        ] {
            pairs.extend(refs.into_iter().map(|r| (r.id_field, r.name_field)));
        }
        let listed: BTreeSet<_> = NAMED_REF_FIELDS.iter().copied().collect();
        assert_eq!(pairs, listed);
    }

    #[test]
    fn rename_touches_only_the_matching_name() {
        let mut d = Descriptor::ApplicationRating(ApplicationRating {
            rater_id: "u1".into(),
            rater_name: "Una".into(),
            position_id: "p1".into(),
            position_name: "Engineer".into(),
            applicant_id: "a1".into(),
            applicant_name: "Mary Fanning".into(),
            rating_score: 4.0,
            rating_text: String::new(),
            tags: vec![],
        });
        assert_eq!(d.rename("a1", "Mary Fanning-Smith"), 1);
        assert_eq!(
            d.rename("a1", "Mary Fanning-Smith"),
            0,
            "no change the second time"
        );
        assert_eq!(d.rename("zz", "Nobody"), 0);
        let Descriptor::ApplicationRating(r) = &d else {
            unreachable!()
        };
        assert_eq!(r.applicant_name, "Mary Fanning-Smith");
        assert_eq!(
            (r.rater_name.as_str(), r.position_name.as_str()),
            ("Una", "Engineer")
        );
    }
}
