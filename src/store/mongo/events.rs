//! The event log on MongoDB: the `events` collection, one document per
//! signal, read by one change stream per process. The change stream is what
//! is resumed (from its token, across a dropped connection or a primary
//! changing); the documents are kept only a while (a TTL index on `at`), as
//! nothing reads them but the stream.

use async_trait::async_trait;
use futures_util::StreamExt;
use mongodb::bson::{doc, DateTime, Document};
use mongodb::change_stream::event::{ChangeStreamEvent, ResumeToken};
use mongodb::change_stream::ChangeStream;
use mongodb::Collection;

use super::db_err;
use crate::events::Signal;
use crate::model::{Millis, ObjectId};
use crate::store::event_log::{EventLog, LogToken, Logged, Tail, TailEnd};
use crate::store::{ErrorKind, StoreError, StoreResult};

/// How long signals stay in `events` after they were appended.
pub const EVENTS_TTL_SECS: u64 = 3_600;

/// The `events` collection.
#[derive(Clone)]
pub struct MongoEventLog {
    events: Collection<Document>,
}

impl MongoEventLog {
    pub fn new(events: Collection<Document>) -> Self {
        Self { events }
    }

    /// The TTL index that keeps `events` small.
    pub async fn create_indexes(&self) -> StoreResult<()> {
        let ttl = mongodb::options::IndexOptions::builder()
            .name("ttl".to_owned())
            .expire_after(std::time::Duration::from_secs(EVENTS_TTL_SECS))
            .build();
        let index = mongodb::IndexModel::builder()
            .keys(doc! { "at": 1 })
            .options(ttl)
            .build();
        self.events.create_index(index).await.map_err(db_err)?;
        Ok(())
    }
}

#[async_trait]
impl EventLog for MongoEventLog {
    async fn append(
        &self,
        origin: &str,
        at: Millis,
        signals: &[(ObjectId, Signal)],
    ) -> StoreResult<()> {
        let at = DateTime::from_millis(at);
        let docs = signals
            .iter()
            .map(|(serial, signal)| {
                let body = bson::to_document(signal).map_err(|e| {
                    StoreError::from_source(ErrorKind::Internal, "cannot encode a signal", e)
                })?;
                Ok(doc! { "_id": serial, "o": origin, "at": at, "s": body })
            })
            .collect::<StoreResult<Vec<Document>>>()?;
        // In order, so the log holds each process's signals in the order of
        // their serials. An append tried again after a lost answer finds the
        // first ones there already: those are done, the rest go on.
        let mut from = 0;
        while from < docs.len() {
            match self.events.insert_many(&docs[from..]).await {
                Ok(_) => return Ok(()),
                Err(err) => match already_there(&err) {
                    Some(index) => from += index + 1,
                    None => return Err(db_err(err)),
                },
            }
        }
        Ok(())
    }

    async fn tail(&self, origin: &str, after: Option<LogToken>) -> StoreResult<Tail> {
        let pipeline = [doc! { "$match": {
            "operationType": "insert",
            "fullDocument.o": { "$ne": origin },
        } }];
        let token = after
            .map(|t| bson::from_bson::<ResumeToken>(t.0))
            .transpose()
            .map_err(|e| {
                StoreError::from_source(ErrorKind::InvalidInput, "not a change stream token", e)
            })?;
        let stream = self
            .events
            .watch()
            .pipeline(pipeline)
            .resume_after(token)
            .await
            .map_err(db_err)?;
        // The change stream until it fails; then, once, why and where it
        // stood, and nothing more.
        Ok(
            futures_util::stream::unfold(Some(stream), |stream| async move {
                let mut stream = stream?;
                match next(&mut stream).await {
                    Ok(logged) => Some((Ok(logged), Some(stream))),
                    Err(error) => {
                        let position = stream
                            .resume_token()
                            .and_then(|token| bson::to_bson(&token).ok())
                            .map(LogToken);
                        Some((Err(Box::new(TailEnd { error, position })), None))
                    }
                }
            })
            .boxed(),
        )
    }
}

/// Where an ordered insert stopped at a document that was there already
/// (the same serial, appended by an earlier try).
fn already_there(err: &mongodb::error::Error) -> Option<usize> {
    const DUPLICATE_KEY: i32 = 11_000;
    match err.kind.as_ref() {
        mongodb::error::ErrorKind::InsertMany(failed) => failed
            .write_errors
            .as_ref()?
            .iter()
            .find(|e| e.code == DUPLICATE_KEY)
            .map(|e| e.index),
        _ => None,
    }
}

/// The next signal the change stream carries, passing over what this
/// version does not read.
async fn next(stream: &mut ChangeStream<ChangeStreamEvent<Document>>) -> StoreResult<Logged> {
    loop {
        let event = match stream.next().await {
            Some(event) => event.map_err(db_err)?,
            None => {
                return Err(StoreError::new(
                    ErrorKind::Unavailable,
                    "the change stream on events ended",
                ))
            }
        };
        let Some(doc) = event.full_document else {
            continue;
        };
        let at = doc.get_datetime("at").map_or(0, |at| at.timestamp_millis());
        let body = doc.get_document("s").map_err(|e| {
            StoreError::from_source(ErrorKind::Internal, "an event without its signal", e)
        })?;
        let (Ok(serial), Ok(origin)) = (doc.get_object_id("_id"), doc.get_str("o")) else {
            tracing::warn!("skipping an event without its serial or origin");
            continue;
        };
        match bson::from_document::<Signal>(body.clone()) {
            Ok(signal) => {
                return Ok(Logged {
                    signal,
                    at,
                    origin: origin.to_owned(),
                    serial,
                })
            }
            // From a newer version of Riverfeed: not for this one.
            Err(err) => {
                tracing::warn!(cause = %err, "skipping a signal this version does not read")
            }
        }
    }
}
