//! Library half of the `larder` binary: pieces its integration tests share with it.

pub mod stress;
