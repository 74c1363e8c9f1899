//! tessera-encoding (skeleton; see DESIGN.md).
