//! The register body as real brokers write it, read with typed serde: several times faster
//! than building a JSON tree, which matters for brokers with tens of thousands of topics that
//! re-register every 30 s. Anything this does not accept goes through the lenient reader.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{
    DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigWrapper, TopicQueueMappingInfo,
};
use crate::error::BodyError;
use crate::json::{parse_strict, parse_value_bounded};

/// Distinguishes an explicit `null` (`Some(None)`) from a missing property (`None`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The values of a JSON object, in order, without keeping its keys.
fn map_values<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Values<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Values<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object or null")
        }
        fn visit_unit<E>(self) -> Result<Vec<T>, E> {
            Ok(Vec::new())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1 << 16));
            while let Some((_, value)) = map.next_entry::<IgnoredAny, Option<T>>()? {
                out.extend(value);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Values(PhantomData))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    #[serde(default, deserialize_with = "present")]
    filter_server_list: Option<Option<Vec<String>>>,
    #[serde(borrow)]
    topic_config_serialize_wrapper: Option<Wrapper<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct Wrapper<'a> {
    data_version: Option<Version>,
    #[serde(default, deserialize_with = "map_values")]
    topic_config_table: Vec<Config>,
    /// Kept as text and read one at a time, each within the bound on lenient reading: as a
    /// tree here, a large body of them would take tens of times its size.
    #[serde(borrow)]
    topic_queue_mapping_info_map: Option<BTreeMap<String, &'a RawValue>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct Version {
    counter: Option<i64>,
    state_version: Option<i64>,
    timestamp: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Config {
    topic_name: Option<String>,
    read_queue_nums: Option<i32>,
    write_queue_nums: Option<i32>,
    perm: Option<i32>,
    topic_sys_flag: Option<i32>,
    topic_filter_type: Option<String>,
    order: Option<bool>,
    attributes: Option<BTreeMap<String, Option<String>>>,
}

impl Version {
    pub(super) fn into_data_version(self) -> DataVersion {
        DataVersion {
            counter: self.counter.unwrap_or(0),
            state_version: self.state_version.unwrap_or(0),
            timestamp: self.timestamp.unwrap_or_else(crate::clock::now_ms),
        }
    }
}

impl Config {
    pub(super) fn into_topic_config(self) -> TopicConfig {
        let d = TopicConfig::default();
        TopicConfig {
            topic_name: self.topic_name,
            read_queue_nums: self.read_queue_nums.unwrap_or(d.read_queue_nums),
            write_queue_nums: self.write_queue_nums.unwrap_or(d.write_queue_nums),
            perm: self.perm.unwrap_or(d.perm),
            topic_sys_flag: self.topic_sys_flag.unwrap_or(d.topic_sys_flag),
            topic_filter_type: self.topic_filter_type.unwrap_or(d.topic_filter_type),
            order: self.order.unwrap_or(false),
            attributes: self
                .attributes
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect(),
        }
    }
}

impl Wrapper<'_> {
    pub(super) fn into_wrapper(self) -> Result<TopicConfigWrapper, BodyError> {
        let mut mapping_info = Vec::new();
        for (topic, info) in self.topic_queue_mapping_info_map.unwrap_or_default() {
            if let Value::Object(obj) =
                parse_value_bounded(info.get().as_bytes(), "topicQueueMappingInfo")?
            {
                mapping_info.push((topic, TopicQueueMappingInfo::from_object(&obj)?));
            }
        }
        Ok(TopicConfigWrapper {
            data_version: self.data_version.unwrap_or_default().into_data_version(),
            topic_configs: self
                .topic_config_table
                .into_iter()
                .map(Config::into_topic_config)
                .collect(),
            mapping_info,
        })
    }
}

/// The JSON register body, if it is in the shape Java brokers write.
pub(super) fn register_body(body: &[u8]) -> Option<Result<RegisterBrokerBody, BodyError>> {
    let parsed: Body = parse_strict(body)?;
    let wrapper = parsed
        .topic_config_serialize_wrapper
        .unwrap_or_default()
        .into_wrapper();
    Some(wrapper.map(|wrapper| RegisterBrokerBody {
        wrapper,
        filter_server_list: parsed.filter_server_list.unwrap_or(Some(Vec::new())),
    }))
}

/// The bare wrapper of pre-3.0.11 brokers, if it is in the shape Java writes.
pub(super) fn wrapper(body: &[u8]) -> Option<Result<TopicConfigWrapper, BodyError>> {
    parse_strict::<Wrapper>(body).map(Wrapper::into_wrapper)
}
