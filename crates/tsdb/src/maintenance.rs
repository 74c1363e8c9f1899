//! Block maintenance of one shard: compaction of neighbouring blocks and retention (placeholders until
//! the block compaction module lands).

use crate::error::Result;
use crate::metrics::Metrics;
use crate::options::Options;
use crate::shard::Shard;

pub(crate) fn compact_and_retain(_s: &Shard, _opts: &Options, _metrics: &Metrics) -> Result<()> {
    Ok(())
}

pub(crate) fn clean_tombstones(_s: &Shard, _metrics: &Metrics) -> Result<()> {
    Ok(())
}
