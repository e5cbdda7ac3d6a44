//! Bulk upserts: statements sent as few `update` commands as the server's
//! size limits allow. Import (`archive.rs`) and the timeline layouts'
//! imports write through it.

use bson::{doc, Bson, Document};

use super::db_err;
use crate::store::{ErrorKind, StoreError, StoreResult};

/// Statements per `update` command: the server's write batch limit is far
/// above this, but a command must stay under 16 MiB ([`MAX_COMMAND_BYTES`]).
const MAX_STATEMENTS: usize = 1000;
/// Bytes of statements per `update` command, well under the 16 MiB limit on a
/// command document.
const MAX_COMMAND_BYTES: usize = 8 * 1024 * 1024;

/// Sends upserts to `collection`, as few `update` commands as the size
/// limits allow, in order; fails on the first statement the server refuses.
pub(in crate::store::mongo) async fn upsert_all(
    db: &mongodb::Database,
    collection: &str,
    statements: Vec<Document>,
) -> StoreResult<()> {
    let mut chunk = Vec::new();
    let mut bytes = 0;
    for statement in statements {
        let size = bson::to_vec(&statement)
            .map_err(|e| StoreError::internal("MongoDB: cannot encode an upsert", e))?
            .len();
        if !chunk.is_empty() && (chunk.len() >= MAX_STATEMENTS || bytes + size > MAX_COMMAND_BYTES)
        {
            send_upserts(db, collection, std::mem::take(&mut chunk)).await?;
            bytes = 0;
        }
        bytes += size;
        chunk.push(statement);
    }
    if !chunk.is_empty() {
        send_upserts(db, collection, chunk).await?;
    }
    Ok(())
}

async fn send_upserts(
    db: &mongodb::Database,
    collection: &str,
    statements: Vec<Document>,
) -> StoreResult<()> {
    let count = statements.len();
    let reply = db
        .run_command(doc! { "update": collection, "updates": statements, "ordered": true })
        .await
        .map_err(db_err)?;
    // A refused statement does not fail the command: the reply says.
    if let Ok(errors) = reply.get_array("writeErrors") {
        if let Some(Bson::Document(first)) = errors.first() {
            // A record of the archive that takes a unique key (a foreign
            // id) held by another of the store: the archive's to mend.
            let kind = match first.get_i32("code") {
                Ok(super::DUPLICATE_KEY) => ErrorKind::InvalidInput,
                _ => ErrorKind::Internal,
            };
            return Err(StoreError::new(
                kind,
                format!(
                    "MongoDB: import into {collection}: statement {} of {count}: {} (code {})",
                    first.get_i32("index").unwrap_or(-1),
                    first.get_str("errmsg").unwrap_or("refused"),
                    first.get_i32("code").unwrap_or(0),
                ),
            ));
        }
    }
    if let Ok(error) = reply.get_document("writeConcernError") {
        return Err(StoreError::new(
            ErrorKind::Unavailable,
            format!(
                "MongoDB: import into {collection}: write concern: {}",
                error.get_str("errmsg").unwrap_or("not satisfied")
            ),
        ));
    }
    Ok(())
}
