//! Runner of promqltest conformance scripts (being written).
