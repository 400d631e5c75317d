//! The wall clock as RocketMQ carries it: milliseconds since the Unix epoch, signed, as Java's
//! `System.currentTimeMillis()` (data versions, heartbeat times, `invokeTime` headers).

/// Milliseconds since the Unix epoch; 0 for a clock set before it.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
