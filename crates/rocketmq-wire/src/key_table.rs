//! How a server's settings are declared: one table of Java property keys with their fields,
//! types and defaults ([`key_table!`]), values converted as Java's property binding converts
//! them ([`PropertyValue`]), and the keys a remote update may never change ([`Blacklist`]).
//! The NameServer's and the controller's settings are both declared through it, and both list
//! themselves with [`crate::properties::write`].

use std::collections::{BTreeMap, BTreeSet};

/// A setting's value as Java's property binding converts it from text, and as a listing shows it.
pub trait PropertyValue: Sized {
    /// `None` when the text does not convert (Java then leaves the setting as it was).
    fn parse(text: &str) -> Option<Self>;
    /// `None` for an unset value, which a listing leaves out.
    fn render(&self) -> Option<String>;
}

/// Values that list as their text, each with how Java converts it.
macro_rules! property_value {
    ($($t:ty => |$text:ident| $parse:expr;)*) => {$(
        impl PropertyValue for $t {
            fn parse($text: &str) -> Option<Self> {
                $parse
            }
            fn render(&self) -> Option<String> {
                Some(self.to_string())
            }
        }
    )*};
}

property_value! {
    // Java parses numbers without trimming: a trailing space makes the value invalid.
    i32 => |text| text.parse().ok();
    i64 => |text| text.parse().ok();
    u64 => |text| text.parse().ok();
    bool => |text| Some(text.eq_ignore_ascii_case("true"));
    String => |text| Some(text.trim().to_string());
}

impl PropertyValue for Option<String> {
    fn parse(text: &str) -> Option<Self> {
        Some(Some(text.trim().to_string()))
    }
    fn render(&self) -> Option<String> {
        self.clone()
    }
}

/// What binding one property did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// The key is in the table and its value was set.
    Bound,
    /// The key is in the table (named here) but its value does not convert; nothing changed.
    Invalid(&'static str),
    /// The key is not in the table.
    Unknown,
}

/// Declares a settings struct from a table of `"javaKey" => field: Type = default;` rows. The
/// struct gets `with_defaults(args)` (the defaults may use the arguments), `set(key, value)`
/// binding one property, `entries()` listing every key with its rendered value, and `KEYS`.
#[macro_export]
macro_rules! key_table {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident ($($arg:ident : $argty:ty),*) {
            $($key:literal => $field:ident : $ty:ty = $default:expr;)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        $vis struct $name {
            $(pub $field: $ty,)*
        }

        impl $name {
            /// Every key of the table, in its order.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            pub fn with_defaults($($arg: $argty),*) -> Self {
                $name { $($field: $default,)* }
            }

            /// Binds one property.
            pub fn set(&mut self, key: &str, value: &str) -> $crate::key_table::Binding {
                match key {
                    $($key => match <$ty as $crate::key_table::PropertyValue>::parse(value) {
                        Some(v) => {
                            self.$field = v;
                            $crate::key_table::Binding::Bound
                        }
                        None => $crate::key_table::Binding::Invalid($key),
                    },)*
                    _ => $crate::key_table::Binding::Unknown,
                }
            }

            /// Every key with its value as a listing shows it (`None`: unset).
            pub fn entries(&self) -> Vec<(&'static str, Option<String>)> {
                vec![$(($key, $crate::key_table::PropertyValue::render(&self.$field)),)*]
            }
        }
    };
}

/// Every key of a config with its value, sorted by key, as a listing shows them: the keys of its
/// file that are not in its table, then the table's `entries` over them (an unset one leaves
/// the key out).
pub fn merged<'a>(
    extras: &'a BTreeMap<String, String>,
    entries: Vec<(&'static str, Option<String>)>,
) -> BTreeMap<&'a str, String> {
    let mut all: BTreeMap<&str, String> = extras
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    for (k, v) in entries {
        match v {
            Some(v) => all.insert(k, v),
            None => all.remove(k),
        };
    }
    all
}

/// Applies a remote config update (UPDATE_NAMESRV_CONFIG, UPDATE_CONTROLLER_CONFIG) as Java's
/// `Configuration.update` does, one behaviour for both binaries: a key of the table is bound as
/// given, untrimmed (`bind`; a value that does not convert leaves the setting alone); a key the
/// configuration lists besides its table (one its file had) takes the new value; any other key
/// is dropped, as Java merges only the keys it already has. The blacklist is checked before.
pub fn apply_update(
    props: &[(String, String)],
    mut bind: impl FnMut(&str, &str) -> Binding,
    extras: &mut BTreeMap<String, String>,
) {
    for (k, v) in props {
        if bind(k, v) == Binding::Unknown {
            if let Some(slot) = extras.get_mut(k) {
                slot.clone_from(v);
            }
        }
    }
}

/// The keys a remote config update may never change: the server's own fixed list and prefixes,
/// and the `configBlackList` its file configured (`;`-separated), fixed when it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blacklist {
    keys: BTreeSet<String>,
    prefixes: &'static [&'static str],
}

impl Blacklist {
    pub fn new(always: &[&str], prefixes: &'static [&'static str], configured: &str) -> Self {
        let mut keys: BTreeSet<String> = always.iter().map(|k| k.to_string()).collect();
        keys.extend(
            configured
                .split(';')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(String::from),
        );
        Blacklist { keys, prefixes }
    }

    pub fn refuses(&self, key: &str) -> bool {
        self.keys.contains(key) || self.prefixes.iter().any(|p| key.starts_with(p))
    }

    /// The first of `keys` that is refused.
    pub fn first_refused<'a>(&self, keys: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
        keys.into_iter().find(|k| self.refuses(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::key_table! {
        struct Sample(base: u64) {
            "count" => count: i64 = 3;
            "limit" => limit: u64 = base * 2;
            "name" => name: Option<String> = None;
            "on" => on: bool = false;
        }
    }

    #[test]
    fn a_table_binds_converts_and_lists_its_keys() {
        let mut s = Sample::with_defaults(5);
        assert_eq!(s.limit, 10);
        assert_eq!(s.set("count", "7"), Binding::Bound);
        assert_eq!(s.set("count", "7 "), Binding::Invalid("count"));
        assert_eq!(s.count, 7, "an invalid value changes nothing");
        assert_eq!(s.set("on", "TRUE"), Binding::Bound);
        assert!(s.on);
        assert_eq!(s.set("other", "x"), Binding::Unknown);
        assert_eq!(Sample::KEYS, ["count", "limit", "name", "on"]);
        assert_eq!(
            s.entries(),
            [
                ("count", Some("7".to_string())),
                ("limit", Some("10".to_string())),
                ("name", None),
                ("on", Some("true".to_string())),
            ]
        );
    }

    #[test]
    fn a_blacklist_holds_its_fixed_keys_prefixes_and_configured_list() {
        let b = Blacklist::new(&["a"], &["tls."], " b ; ;c");
        for key in ["a", "b", "c", "tls.server.mode"] {
            assert!(b.refuses(key), "{key}");
        }
        assert!(!b.refuses("d"));
        assert_eq!(b.first_refused(["d", "c", "a"]), Some("c"));
    }
}
