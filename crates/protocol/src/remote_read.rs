//! Remote read (to be written).
