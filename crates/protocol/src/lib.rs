//! tessera-protocol (skeleton; see DESIGN.md).
