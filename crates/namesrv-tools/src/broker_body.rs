//! REGISTER_BROKER bodies exactly as brokers send them.
//!
//! The JSON form is written here rather than with the wire crate's `RegisterBrokerBody`, whose
//! writer leaves out `mappingDataVersion` and `topicQueueMappingDetailMap`: a 5.x broker always
//! sends both, and some NameServers refuse a body without them.

use bytes::Bytes;
use rocketmq_wire::body::{DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigWrapper};
use rocketmq_wire::json::{JsonStyle, JsonWriter};

use crate::cli::BodyForm;

/// Java's read/write permission.
pub const PERM_RW: i32 = 6;
/// Bytes a topic takes in the JSON form beyond its name twice, for the initial allocation.
const JSON_BYTES_PER_TOPIC: usize = 160;

/// A body whose topics each have their own queue count.
pub fn encode_table(table: &[(&str, i32)], data_version: DataVersion, form: BodyForm) -> Bytes {
    match form {
        BodyForm::Json => encode_json(table, data_version).into(),
        BodyForm::Compressed => RegisterBrokerBody {
            wrapper: TopicConfigWrapper {
                data_version,
                topic_configs: table
                    .iter()
                    .map(|(t, queues)| TopicConfig::new(t, *queues, PERM_RW))
                    .collect(),
                mapping_info: Vec::new(),
            },
            filter_server_list: Some(Vec::new()),
        }
        .encode_compressed(form.version())
        .into(),
    }
}

/// fastjson's output for a 5.x broker's RegisterBrokerBody: properties in alphabetical order.
fn encode_json(topics: &[(&str, i32)], data_version: DataVersion) -> Vec<u8> {
    let names: usize = topics.iter().map(|(t, _)| 2 * t.len()).sum();
    let mut w = JsonWriter::with_capacity(
        JsonStyle::Fastjson,
        256 + names + topics.len() * JSON_BYTES_PER_TOPIC,
    );
    w.object(|w| {
        w.key("filterServerList").string_array([]);
        w.key("topicConfigSerializeWrapper").object(|w| {
            w.key("dataVersion");
            data_version.write(w);
            w.key("mappingDataVersion");
            DataVersion {
                counter: 0,
                ..data_version
            }
            .write(w);
            w.key("topicConfigTable").object(|w| {
                for (topic, queues) in topics {
                    let queues = *queues;
                    w.key(topic).object(|w| {
                        w.key("attributes").object(|_| {});
                        w.key("order").bool(false);
                        w.key("perm").int(PERM_RW.into());
                        w.key("readQueueNums").int(queues.into());
                        w.key("topicFilterType").string("SINGLE_TAG");
                        w.key("topicName").string(topic);
                        w.key("topicSysFlag").int(0);
                        w.key("writeQueueNums").int(queues.into());
                    });
                }
            });
            w.key("topicQueueMappingDetailMap").object(|_| {});
            w.key("topicQueueMappingInfoMap").object(|_| {});
        });
    });
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocketmq_wire::codes::version;

    #[test]
    fn json_form_is_what_a_5x_broker_sends() {
        let dv = DataVersion {
            counter: 42,
            state_version: 0,
            timestamp: 1700000000000,
        };
        let body = encode_table(&[("TopicTest", 4)], dv, BodyForm::Json);
        let expected = concat!(
            r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":42,"stateVersion":0,"timestamp":1700000000000},"#,
            r#""mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"attributes":{},"#,
            r#""order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}},"#,
            r#""topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}"#
        );
        assert_eq!(std::str::from_utf8(&body).unwrap(), expected);
    }

    #[test]
    fn both_forms_decode_to_the_same_topics() {
        let dv = DataVersion {
            counter: 7,
            state_version: 0,
            timestamp: 1,
        };
        let topics: Vec<String> = (0..3).map(|i| format!("T{i}")).collect();
        let table: Vec<(&str, i32)> = topics.iter().map(|t| (t.as_str(), 8)).collect();
        for form in [BodyForm::Json, BodyForm::Compressed] {
            let body = encode_table(&table, dv, form);
            let decoded = RegisterBrokerBody::decode(
                Some(&body),
                form.version(),
                form == BodyForm::Compressed,
                rocketmq_wire::body::MAX_INFLATED_BODY,
            )
            .unwrap();
            assert_eq!(decoded.wrapper.data_version, dv);
            assert_eq!(decoded.wrapper.topic_configs.len(), 3);
            assert!(form.version() >= version::V3_0_11);
        }
    }
}
