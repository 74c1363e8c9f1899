//! tessera-api (skeleton; see DESIGN.md).
