use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{as_object, parse_object, parse_peer_object, strings_of};
use crate::error::BodyError;
use crate::json::{JsonStyle, JsonWriter, ObjectExt};

/// One broker group's queues of a topic.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct QueueData {
    pub broker_name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
    pub topic_sys_flag: i32,
}

/// A broker group: its cluster and the address of each member (id 0 = master).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BrokerData {
    pub cluster: String,
    pub broker_name: String,
    pub broker_addrs: BTreeMap<i64, String>,
    pub enable_acting_master: bool,
    pub zone_name: Option<String>,
}

/// Static-topic mapping of one broker, passed through from brokers to clients.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TopicQueueMappingInfo {
    pub topic: Option<String>,
    pub scope: Option<String>,
    pub total_queues: i32,
    pub bname: Option<String>,
    pub epoch: i64,
    pub dirty: bool,
    pub curr_id_map: Option<BTreeMap<i64, i64>>,
}

/// The answer to GET_ROUTEINFO_BY_TOPIC.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TopicRouteData {
    pub order_topic_conf: Option<String>,
    pub queue_datas: Vec<QueueData>,
    pub broker_datas: Vec<BrokerData>,
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    pub topic_queue_mapping_by_broker: Option<BTreeMap<String, TopicQueueMappingInfo>>,
}

fn required_string(obj: &Map<String, Value>, key: &str) -> Result<String, BodyError> {
    Ok(obj.opt_string(key)?.unwrap_or_default())
}

/// A map with numeric keys, which fastjson may have written quoted or not.
pub(super) fn numeric_map(
    obj: &Map<String, Value>,
    what: &str,
) -> Result<BTreeMap<i64, Value>, BodyError> {
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        let id = k
            .trim()
            .parse()
            .map_err(|_| BodyError::field(what, "map key is not a number"))?;
        if !v.is_null() {
            out.insert(id, v.clone());
        }
    }
    Ok(out)
}

/// A group's `brokerAddrs`: member ids, quoted or bare, to addresses.
pub(super) fn broker_addrs(obj: &Map<String, Value>) -> Result<BTreeMap<i64, String>, BodyError> {
    let Some(addrs) = obj.opt_object("brokerAddrs")? else {
        return Ok(BTreeMap::new());
    };
    numeric_map(addrs, "brokerAddrs")?
        .into_iter()
        .map(|(id, addr)| Ok((id, crate::json::value_as_string("brokerAddrs", &addr)?)))
        .collect()
}

impl QueueData {
    pub fn from_object(obj: &Map<String, Value>) -> Result<Self, BodyError> {
        Ok(QueueData {
            broker_name: required_string(obj, "brokerName")?,
            read_queue_nums: obj.i32_or("readQueueNums", 0)?,
            write_queue_nums: obj.i32_or("writeQueueNums", 0)?,
            perm: obj.i32_or("perm", 0)?,
            topic_sys_flag: obj.i32_or("topicSysFlag", 0)?,
        })
    }

    pub fn write(&self, w: &mut JsonWriter) {
        w.object(|w| {
            w.key("brokerName").string(&self.broker_name);
            w.key("perm").int(self.perm as i64);
            w.key("readQueueNums").int(self.read_queue_nums as i64);
            w.key("topicSysFlag").int(self.topic_sys_flag as i64);
            w.key("writeQueueNums").int(self.write_queue_nums as i64);
        });
    }
}

impl BrokerData {
    pub fn new(cluster: &str, broker_name: &str) -> Self {
        BrokerData {
            cluster: cluster.to_string(),
            broker_name: broker_name.to_string(),
            ..Default::default()
        }
    }

    pub fn from_object(obj: &Map<String, Value>) -> Result<Self, BodyError> {
        Ok(BrokerData {
            cluster: required_string(obj, "cluster")?,
            broker_name: required_string(obj, "brokerName")?,
            broker_addrs: broker_addrs(obj)?,
            enable_acting_master: obj.bool_or("enableActingMaster", false)?,
            zone_name: obj.opt_string("zoneName")?,
        })
    }

    pub fn write(&self, w: &mut JsonWriter) {
        w.object(|w| {
            w.key("brokerAddrs").object(|w| {
                for (id, addr) in &self.broker_addrs {
                    w.num_key(*id).string(addr);
                }
            });
            w.key("brokerName").string(&self.broker_name);
            w.key("cluster").string(&self.cluster);
            w.key("enableActingMaster").bool(self.enable_acting_master);
            w.opt_str_field("zoneName", self.zone_name.as_deref());
        });
    }
}

impl TopicQueueMappingInfo {
    pub fn from_object(obj: &Map<String, Value>) -> Result<Self, BodyError> {
        let curr_id_map = match obj.opt_object("currIdMap")? {
            None => None,
            Some(m) => Some(
                numeric_map(m, "currIdMap")?
                    .into_iter()
                    .map(|(k, v)| Ok((k, crate::json::value_as_i64("currIdMap", &v)?)))
                    .collect::<Result<_, BodyError>>()?,
            ),
        };
        Ok(TopicQueueMappingInfo {
            topic: obj.opt_string("topic")?,
            scope: obj.opt_string("scope")?,
            total_queues: obj.i32_or("totalQueues", 0)?,
            bname: obj.opt_string("bname")?,
            epoch: obj.i64_or("epoch", 0)?,
            dirty: obj.bool_or("dirty", false)?,
            curr_id_map,
        })
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        Self::from_object(&parse_peer_object(body, "TopicQueueMappingInfo")?)
    }

    pub fn write(&self, w: &mut JsonWriter) {
        w.object(|w| {
            w.opt_str_field("bname", self.bname.as_deref());
            if let Some(map) = &self.curr_id_map {
                w.key("currIdMap").object(|w| {
                    for (k, v) in map {
                        w.num_key(*k).int(*v);
                    }
                });
            }
            w.key("dirty").bool(self.dirty);
            w.key("epoch").long(self.epoch);
            w.opt_str_field("scope", self.scope.as_deref());
            w.opt_str_field("topic", self.topic.as_deref());
            w.key("totalQueues").int(self.total_queues as i64);
        });
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        self.write(&mut w);
        w.finish()
    }
}

impl TopicRouteData {
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let obj = parse_object(body, "TopicRouteData")?;
        let mut route = TopicRouteData {
            order_topic_conf: obj.opt_string("orderTopicConf")?,
            ..Default::default()
        };
        for qd in obj.opt_array("queueDatas")?.into_iter().flatten() {
            route
                .queue_datas
                .push(QueueData::from_object(as_object(qd, "QueueData")?)?);
        }
        for bd in obj.opt_array("brokerDatas")?.into_iter().flatten() {
            route
                .broker_datas
                .push(BrokerData::from_object(as_object(bd, "BrokerData")?)?);
        }
        for (addr, list) in obj.opt_object("filterServerTable")?.into_iter().flatten() {
            route
                .filter_server_table
                .insert(addr.clone(), strings_of(list));
        }
        if let Some(mapping) = obj.opt_object("topicQueueMappingByBroker")? {
            let mut out = BTreeMap::new();
            for (bname, info) in mapping {
                let info = TopicQueueMappingInfo::from_object(as_object(info, "mapping")?)?;
                out.insert(bname.clone(), info);
            }
            route.topic_queue_mapping_by_broker = Some(out);
        }
        Ok(route)
    }

    pub fn write(&self, w: &mut JsonWriter) {
        w.object(|w| {
            w.key("brokerDatas").array(|w| {
                for bd in &self.broker_datas {
                    bd.write(w);
                }
            });
            w.key("filterServerTable").object(|w| {
                for (addr, servers) in &self.filter_server_table {
                    w.key(addr).string_array(servers.iter().map(String::as_str));
                }
            });
            w.opt_str_field("orderTopicConf", self.order_topic_conf.as_deref());
            w.key("queueDatas").array(|w| {
                for qd in &self.queue_datas {
                    qd.write(w);
                }
            });
            if let Some(mapping) = &self.topic_queue_mapping_by_broker {
                w.key("topicQueueMappingByBroker").object(|w| {
                    for (bname, info) in mapping {
                        w.key(bname);
                        info.write(w);
                    }
                });
            }
        });
    }

    pub fn encode(&self, style: JsonStyle) -> Vec<u8> {
        let mut w = JsonWriter::with_capacity(style, 512);
        self.write(&mut w);
        w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NON_STANDARD: &str = r#"{"brokerDatas":[{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
    const STANDARD: &str = r#"{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.1:10911","1":"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
    const FULL: &str = r#"{"brokerDatas":[{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":true,"zoneName":"zone-1"}],"filterServerTable":{"192.168.0.1:10911":["f1:1","f2:2"]},"orderTopicConf":"broker-a:4;broker-b:4","queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}],"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","currIdMap":{0:0,1:1},"dirty":false,"epoch":3,"scope":"__global__","topic":"TopicTest","totalQueues":8}}}"#;

    #[test]
    fn golden_route_forms_round_trip_byte_for_byte() {
        let route = TopicRouteData::decode(NON_STANDARD.as_bytes()).unwrap();
        assert_eq!(route.encode(JsonStyle::Fastjson), NON_STANDARD.as_bytes());
        assert_eq!(route.encode(JsonStyle::Standard), STANDARD.as_bytes());
        assert_eq!(TopicRouteData::decode(STANDARD.as_bytes()).unwrap(), route);
        let full = TopicRouteData::decode(FULL.as_bytes()).unwrap();
        assert_eq!(full.encode(JsonStyle::Fastjson), FULL.as_bytes());
        assert_eq!(full.broker_datas[0].zone_name.as_deref(), Some("zone-1"));
    }

    #[test]
    fn numbers_as_strings_and_missing_fields_are_accepted() {
        let route = TopicRouteData::decode(
            br#"{"queueDatas":[{"brokerName":"b","perm":"6","readQueueNums":"2"}],"extra":1}"#,
        )
        .unwrap();
        assert_eq!(route.queue_datas[0].perm, 6);
        assert_eq!(route.queue_datas[0].read_queue_nums, 2);
        assert_eq!(route.queue_datas[0].write_queue_nums, 0);
        assert!(TopicRouteData::decode(br#"{"brokerDatas":[{"brokerAddrs":{"x":"a"}}]}"#).is_err());
    }
}
