//! tessera-wal (skeleton; see DESIGN.md).
