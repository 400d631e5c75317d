//! A body read against the previous one's index must leave a registry exactly where reading
//! it whole would: every entry left out is byte-identical to one applied before.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::codes::version;

/// A 5.x broker's JSON body as fastjson writes it; topics are (name, queues).
fn body(counter: i64, topics: &[(String, i32)]) -> Vec<u8> {
    let entries: Vec<String> = topics
        .iter()
        .map(|(t, q)| {
            format!(
                r#""{t}":{{"attributes":{{}},"order":false,"perm":6,"readQueueNums":{q},"topicFilterType":"SINGLE_TAG","topicName":"{t}","topicSysFlag":0,"writeQueueNums":{q}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"filterServerList":[],"topicConfigSerializeWrapper":{{"dataVersion":{{"counter":{counter},"stateVersion":0,"timestamp":{counter}}},"mappingDataVersion":{{"counter":0,"stateVersion":0,"timestamp":1}},"topicConfigTable":{{{}}},"topicQueueMappingDetailMap":{{}},"topicQueueMappingInfoMap":{{}}}}}}"#,
        entries.join(",")
    )
    .into_bytes()
}

fn whole(body: &[u8]) -> RegisterBrokerBody {
    RegisterBrokerBody::decode(Some(body), version::V5_0_0, false, 1 << 30).unwrap()
}

/// Topic name → config after applying `configs` in order over `state`.
fn apply(
    mut state: BTreeMap<String, TopicConfig>,
    configs: &[TopicConfig],
) -> BTreeMap<String, TopicConfig> {
    for c in configs {
        if let Some(name) = &c.topic_name {
            state.insert(name.clone(), c.clone());
        }
    }
    state
}

fn topics(n: usize) -> Vec<(String, i32)> {
    (0..n)
        .map(|i| (format!("Topic-{i:05}"), 1 + (i % 16) as i32))
        .collect()
}

#[derive(Clone, Debug)]
enum Edit {
    Queues(usize, i32),
    Insert(usize),
    Delete(usize),
    Rotate(usize),
    Nothing,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), 1..64i32).prop_map(|(i, q)| Edit::Queues(i, q)),
        2 => any::<usize>().prop_map(Edit::Insert),
        2 => any::<usize>().prop_map(Edit::Delete),
        1 => any::<usize>().prop_map(Edit::Rotate),
        1 => Just(Edit::Nothing),
    ]
}

fn change(table: &mut Vec<(String, i32)>, edit: &Edit, fresh: &mut usize) {
    let n = table.len();
    match *edit {
        Edit::Queues(i, q) if n > 0 => table[i % n].1 = q,
        Edit::Insert(i) => {
            *fresh += 1;
            table.insert(i % (n + 1), (format!("New-{fresh}"), 3));
        }
        Edit::Delete(i) if n > 0 => {
            table.remove(i % n);
        }
        Edit::Rotate(i) if n > 0 => table.rotate_left(i % n),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn reading_against_the_previous_index_applies_like_reading_whole(
        n in 0usize..120,
        rounds in prop::collection::vec(prop::collection::vec(edit(), 0..4), 1..8),
    ) {
        let mut table = topics(n);
        let mut fresh = 0;
        let first = body(1, &table);
        let read = TableRead::read(&first, None).unwrap().unwrap();
        prop_assert!(!read.partial);
        prop_assert_eq!(&read.body, &whole(&first));
        prop_assert_eq!(read.listed, n);
        let mut state = apply(BTreeMap::new(), &read.body.wrapper.topic_configs);
        let mut index = read.index.unwrap();
        for (round, edits) in rounds.iter().enumerate() {
            for e in edits {
                change(&mut table, e, &mut fresh);
            }
            let next = body(2 + round as i64, &table);
            let full = whole(&next);
            let read = TableRead::read(&next, Some(&index)).unwrap().unwrap();
            prop_assert!(read.partial);
            prop_assert_eq!(read.listed, table.len());
            prop_assert_eq!(&read.body.wrapper.data_version, &full.wrapper.data_version);
            prop_assert_eq!(&read.body.filter_server_list, &full.filter_server_list);
            // Every entry decoded is one of the body's; every one left out was applied before.
            for c in &read.body.wrapper.topic_configs {
                prop_assert!(full.wrapper.topic_configs.contains(c));
            }
            let expected = apply(state.clone(), &full.wrapper.topic_configs);
            state = apply(state, &read.body.wrapper.topic_configs);
            prop_assert_eq!(&state, &expected);
            prop_assert_eq!(index_listed(&read.index), table.len());
            index = read.index.unwrap();
        }
    }

    #[test]
    fn any_bytes_are_read_or_declined_without_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = TableRead::read(&bytes, None);
        let index = TableRead::read(&body(1, &topics(40)), None).unwrap().unwrap().index;
        let _ = TableRead::read(&bytes, index.as_ref());
    }
}

fn index_listed(index: &Option<TableIndex>) -> usize {
    index.as_ref().map_or(usize::MAX, TableIndex::listed)
}

#[test]
fn a_body_read_against_its_own_index_decodes_nothing() {
    let first = body(1, &topics(1000));
    let index = TableRead::read(&first, None)
        .unwrap()
        .unwrap()
        .index
        .unwrap();
    let again = TableRead::read(&body(2, &topics(1000)), Some(&index))
        .unwrap()
        .unwrap();
    assert!(again.partial);
    assert!(again.body.wrapper.topic_configs.is_empty());
    assert_eq!(again.listed, 1000);
    assert_eq!(again.body.wrapper.data_version.counter, 2);
}

#[test]
fn one_changed_topic_decodes_only_the_entries_of_its_block() {
    let mut table = topics(1000);
    let index = TableRead::read(&body(1, &table), None)
        .unwrap()
        .unwrap()
        .index
        .unwrap();
    table[500].1 = 40;
    let read = TableRead::read(&body(2, &table), Some(&index))
        .unwrap()
        .unwrap();
    let decoded = &read.body.wrapper.topic_configs;
    assert!(decoded.len() <= BLOCK, "{} entries decoded", decoded.len());
    assert!(decoded
        .iter()
        .any(|c| c.topic_name.as_deref() == Some("Topic-00500") && c.read_queue_nums == 40));
}

#[test]
fn a_topic_listed_twice_is_always_read_whole() {
    let mut table = topics(100);
    table.push(("Topic-00007".into(), 9));
    let read = TableRead::read(&body(1, &table), None).unwrap().unwrap();
    assert!(read.index.is_none());
    assert_eq!(read.body, whole(&body(1, &table)));

    // A duplicate added later is not read as a difference.
    let table = topics(100);
    let index = TableRead::read(&body(1, &table), None)
        .unwrap()
        .unwrap()
        .index
        .unwrap();
    let mut doubled = table.clone();
    doubled.insert(50, ("Topic-00090".into(), 2));
    assert!(TableRead::read(&body(2, &doubled), Some(&index)).is_none());
}

#[test]
fn bodies_in_other_shapes_are_left_to_the_ordinary_reader() {
    for odd in [
        &br#"{"topicConfigSerializeWrapper":{"topicConfigTable":null}}"#[..],
        br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"a":{"topicName":"a","perm":"6"}}}}"#,
        br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"a":{}},"topic\u0043onfigTable":{"b":{}}}}"#,
        br#"[1,2]"#,
        b"",
    ] {
        assert!(TableRead::read(odd, None).is_none(), "{}", String::from_utf8_lossy(odd));
    }
}
