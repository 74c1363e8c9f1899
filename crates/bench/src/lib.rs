//! tessera-bench (skeleton; see DESIGN.md).
