//! tessera-tsdb (skeleton; see DESIGN.md).
