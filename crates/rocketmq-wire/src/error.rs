//! Errors of the wire layer.

/// A frame that cannot be decoded; the connection it came on must be closed.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame length {0} outside 4..={1}")]
    BadLength(i64, usize),
    #[error("header length {header} exceeds frame length {frame}")]
    HeaderTooLong { header: usize, frame: usize },
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    #[error("malformed header: {0}")]
    BadHeader(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A body or JSON value that does not have the expected shape.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("{0}")]
    Json(String),
    #[error("field {field}: {reason}")]
    Field { field: String, reason: &'static str },
    #[error("{0}")]
    Format(String),
}

impl BodyError {
    pub fn field(field: &str, reason: &'static str) -> Self {
        BodyError::Field {
            field: field.to_string(),
            reason,
        }
    }
}
