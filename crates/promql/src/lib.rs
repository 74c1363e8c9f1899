//! tessera-promql (skeleton; see DESIGN.md).
