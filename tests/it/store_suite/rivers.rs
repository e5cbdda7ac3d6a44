//! Cases of rivers beyond their reads and writes (those are in
//! `timelines`): the ones a crash left being built, looked for at start.

use anyhow::{ensure, Result};
use riverfeed::model::Position;
use riverfeed::store::prelude::*;
use riverfeed::store::{River, RiverWrite};

use super::{OTHER, T};

pub(super) async fn building_rivers(store: &dyn Store) -> Result<()> {
    let built = River {
        complete_from: Position::MIN,
        touched: 1_000,
    };
    let building = River {
        complete_from: Position::MAX,
        touched: 2_000,
    };
    ensure!(store.building_rivers(10).await?.is_empty(), "none yet");
    store
        .write_river(T, "br-done", RiverWrite::Put(built))
        .await?;
    for (tenant, reader) in [(T, "br-half"), (OTHER, "br-half"), (T, "br-new")] {
        store
            .write_river(tenant, reader, RiverWrite::Put(building))
            .await?;
    }
    let pair = |t: &str, r: &str| (t.to_owned(), r.to_owned());
    let mut found = store.building_rivers(10).await?;
    found.sort();
    ensure!(
        found
            == [
                pair(T, "br-half"),
                pair(T, "br-new"),
                pair(OTHER, "br-half")
            ],
        "across tenants, only those being built: {found:?}"
    );
    ensure!(
        store.building_rivers(2).await?.len() == 2,
        "at most the limit"
    );
    // Built, or dropped: no longer listed.
    store
        .write_river(T, "br-half", RiverWrite::Put(built))
        .await?;
    store.write_river(T, "br-new", RiverWrite::Drop).await?;
    let found = store.building_rivers(10).await?;
    ensure!(found == [pair(OTHER, "br-half")], "{found:?}");
    Ok(())
}
