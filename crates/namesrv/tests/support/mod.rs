//! What the NameServer's integration tests share: only this package's tests can name the binary
//! Cargo built for them.

// Each test binary uses a part of it.
#![allow(dead_code)]

use namesrv_testkit::Launch;

/// The `mqnamesrv` built for these tests, started as a separate process.
pub const MQNAMESRV: Launch = Launch::binary(MQNAMESRV_PATH);

/// Its path, for tests that start it with arguments of their own.
pub const MQNAMESRV_PATH: &str = env!("CARGO_BIN_EXE_mqnamesrv");
