//! How a header is declared: one table per header ([`header!`]) names each field, its type and
//! its `extFields` key, and the type decides how the field is read and written ([`Field`]). A
//! field whose rule differs from its type's names a reader of its own (`with`).

use super::HeaderError;
use crate::RemotingCommand;

/// How a field of one type is read off a command and written onto one.
///
/// - `&str`, `i64` and `i32` are required: a missing field, or a number that does not parse
///   (beyond its Java type's range included), fails the header;
/// - an `Option` is optional, read as Java reads it: absent or an unparsable number is `None`,
///   and `None` is left out when written, as Java leaves out null fields;
/// - `bool` is Java's primitive `boolean`: true iff the text is `true` ignoring case, false when
///   absent, and always written.
pub trait Field<'a>: Sized {
    fn read(cmd: &'a RemotingCommand, key: &'static str) -> Result<Self, HeaderError>;
    fn write(&self, cmd: RemotingCommand, key: &str) -> RemotingCommand;
}

/// An optional field's value under `key`; left out when absent, as Java leaves out nulls.
fn write_if_present(
    value: Option<impl ToString>,
    cmd: RemotingCommand,
    key: &str,
) -> RemotingCommand {
    match value {
        Some(v) => cmd.with_ext(key, v),
        None => cmd,
    }
}

impl<'a> Field<'a> for &'a str {
    fn read(cmd: &'a RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext(key).ok_or(HeaderError::Missing(key))
    }
    fn write(&self, cmd: RemotingCommand, key: &str) -> RemotingCommand {
        cmd.with_ext(key, self)
    }
}

impl<'a> Field<'a> for Option<&'a str> {
    fn read(cmd: &'a RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd.ext(key))
    }
    fn write(&self, cmd: RemotingCommand, key: &str) -> RemotingCommand {
        write_if_present(self.as_ref(), cmd, key)
    }
}

impl<'a> Field<'a> for bool {
    fn read(cmd: &'a RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd.ext_bool(key).unwrap_or(false))
    }
    fn write(&self, cmd: RemotingCommand, key: &str) -> RemotingCommand {
        cmd.with_ext(key, self)
    }
}

impl<'a> Field<'a> for Option<bool> {
    fn read(cmd: &'a RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd.ext_bool(key))
    }
    fn write(&self, cmd: RemotingCommand, key: &str) -> RemotingCommand {
        write_if_present(self.as_ref(), cmd, key)
    }
}

/// Java's `int` and `long`: decimal, untrimmed.
macro_rules! number_field {
    ($($t:ty),*) => {$(
        impl<'a> Field<'a> for $t {
            fn read(cmd: &'a RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
                let text = <&str>::read(cmd, key)?;
                text.parse().map_err(|_| HeaderError::NotANumber {
                    field: key,
                    text: text.to_string(),
                })
            }
            fn write(&self, cmd: RemotingCommand, key: &str) -> RemotingCommand {
                cmd.with_ext(key, self)
            }
        }

        impl<'a> Field<'a> for Option<$t> {
            fn read(cmd: &'a RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
                Ok(cmd.ext(key).and_then(|text| text.parse().ok()))
            }
            fn write(&self, cmd: RemotingCommand, key: &str) -> RemotingCommand {
                write_if_present(self.as_ref(), cmd, key)
            }
        }
    )*};
}

number_field!(i64, i32);

/// A text field a handler can do without: missing reads as empty.
pub fn or_empty<'a>(cmd: &'a RemotingCommand, key: &'static str) -> Result<&'a str, HeaderError> {
    Ok(cmd.ext(key).unwrap_or_default())
}

/// A required number whose unparsable text counts as missing.
pub fn unparsable_is_missing(cmd: &RemotingCommand, key: &'static str) -> Result<i64, HeaderError> {
    cmd.ext_i64(key).ok_or(HeaderError::Missing(key))
}

/// An optional number that must parse when present (a fence such as an epoch must not be
/// dropped silently).
pub fn parsed_if_present<'a, T: Field<'a>>(
    cmd: &'a RemotingCommand,
    key: &'static str,
) -> Result<Option<T>, HeaderError> {
    cmd.ext(key).map(|_| T::read(cmd, key)).transpose()
}

/// An optional number that must parse when present, surrounding spaces allowed (ours: typed by
/// an operator rather than written by a Java peer).
pub fn trimmed_if_present(
    cmd: &RemotingCommand,
    key: &'static str,
) -> Result<Option<i64>, HeaderError> {
    cmd.ext(key)
        .map(|text| {
            text.trim().parse().map_err(|_| HeaderError::NotANumber {
                field: key,
                text: text.to_string(),
            })
        })
        .transpose()
}

/// Declares a header: the struct, and its [`super::RequestHeader`] (`: request CODE`, a name in
/// [`crate::codes::request`]) or [`super::ResponseHeader`] (`: response`) read and write from
/// one table of `field: Type = KEY` (a name in [`super::keys`]), optionally `with reader`.
/// Required fields are checked in the order they are listed. `missing as Variant` answers any
/// missing required field with that [`HeaderError`] instead.
macro_rules! header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident<$lt:lifetime> : request $code:ident $(, missing as $missing:ident)? {
            $($(#[$fmeta:meta])* $field:ident : $ty:ty = $key:ident $(with $reader:path)?),* $(,)?
        }
    ) => {
        header!(@common $(#[$meta])* $name [<$lt>] [&$lt $crate::RemotingCommand]
            { $($(#[$fmeta])* $field : $ty = $key $(with $reader)?),* });

        impl<$lt> $crate::headers::RequestHeader<$lt> for $name<$lt> {
            const CODE: i32 = $crate::codes::request::$code;

            fn from_command(cmd: &$lt $crate::RemotingCommand) -> Result<Self, $crate::headers::HeaderError> {
                Self::read_fields(cmd)
                    $(.map_err(|e| match e {
                        $crate::headers::HeaderError::Missing(_) => $crate::headers::HeaderError::$missing,
                        e => e,
                    }))?
            }

            fn write(&self, cmd: $crate::RemotingCommand) -> $crate::RemotingCommand {
                self.write_fields(cmd)
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident<$lt:lifetime> : response {
            $($(#[$fmeta:meta])* $field:ident : $ty:ty = $key:ident $(with $reader:path)?),* $(,)?
        }
    ) => {
        header!(@common $(#[$meta])* $name [<$lt>] [&$lt $crate::RemotingCommand]
            { $($(#[$fmeta])* $field : $ty = $key $(with $reader)?),* });
        header!(@response $name<$lt> $lt);
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident : response {
            $($(#[$fmeta:meta])* $field:ident : $ty:ty = $key:ident $(with $reader:path)?),* $(,)?
        }
    ) => {
        header!(@common $(#[$meta])* $name [] [&$crate::RemotingCommand]
            { $($(#[$fmeta])* $field : $ty = $key $(with $reader)?),* });
        header!(@response $name 'h);
    };
    (@response $name:ident $(<$own:lifetime>)? $lt:lifetime) => {
        impl<$lt> $crate::headers::ResponseHeader<$lt> for $name$(<$own>)? {
            fn from_command(cmd: &$lt $crate::RemotingCommand) -> Result<Self, $crate::headers::HeaderError> {
                Self::read_fields(cmd)
            }

            fn write(&self, cmd: $crate::RemotingCommand) -> $crate::RemotingCommand {
                self.write_fields(cmd)
            }
        }
    };
    (@common $(#[$meta:meta])* $name:ident [$($generics:tt)*] [$($source:tt)*] {
        $($(#[$fmeta:meta])* $field:ident : $ty:ty = $key:ident $(with $reader:path)?),*
    }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name $($generics)* {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $($generics)* $name $($generics)* {
            fn read_fields(cmd: $($source)*) -> Result<Self, $crate::headers::HeaderError> {
                Ok($name {
                    $($field: header!(@read cmd, $key, $ty $(, $reader)?),)*
                })
            }

            fn write_fields(&self, cmd: $crate::RemotingCommand) -> $crate::RemotingCommand {
                $(let cmd = $crate::headers::field::Field::write(
                    &self.$field,
                    cmd,
                    $crate::headers::keys::$key,
                );)*
                cmd
            }
        }
    };
    (@read $cmd:ident, $key:ident, $ty:ty) => {
        <$ty as $crate::headers::field::Field>::read($cmd, $crate::headers::keys::$key)?
    };
    (@read $cmd:ident, $key:ident, $ty:ty, $reader:path) => {
        $reader($cmd, $crate::headers::keys::$key)?
    };
}

pub(crate) use header;
