//! What the fault tests of this crate share.

// Each test binary uses a part of it.
#![allow(dead_code)]

pub mod net;

/// `Some(())` when the machine can run a fault test; otherwise the test fails when
/// NAMESRV_TEST_REQUIRE_ALL is set (the test command sets it), or says on the terminal why it
/// skips.
pub fn able(can: bool, why: &str) -> Option<()> {
    if can {
        return Some(());
    }
    if std::env::var_os("NAMESRV_TEST_REQUIRE_ALL").is_some_and(|v| !v.is_empty()) {
        panic!("{why} (NAMESRV_TEST_REQUIRE_ALL is set, so it cannot skip)");
    }
    eprintln!("SKIPPED: {why}");
    None
}
