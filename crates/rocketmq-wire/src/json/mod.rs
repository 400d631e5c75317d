//! JSON as the Java side speaks it: a writer for fastjson's exact output forms and a lenient
//! reader for what Java peers send.

mod lenient;
mod read;
mod writer;

pub use lenient::parse as parse_lenient;
pub(crate) use read::parse_strict;
pub use read::{parse_value, parse_value_bounded, ObjectExt, TREE_MAX};
pub(crate) use read::{value_as_i64, value_as_string};
pub use writer::{JsonStyle, JsonWriter};
