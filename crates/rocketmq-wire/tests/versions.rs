//! Version ordinals are named as Java names them: the fixture is `MQVersion.Version.values()`
//! printed by the 5.5.1 client jar, one name per line in ordinal order.

use rocketmq_wire::codes::version;

#[test]
fn every_ordinal_has_the_name_of_javas_version_list() {
    let names: Vec<&str> = include_str!("data/mqversion-names-5.5.1.txt")
        .lines()
        .collect();
    assert_eq!(names.len(), 613);
    for (ordinal, name) in names.iter().enumerate() {
        assert_eq!(
            version::java_name(ordinal as i32).as_deref(),
            Some(*name),
            "ordinal {ordinal}"
        );
    }
    // Past the list Java answers its last name; a negative ordinal is no release.
    assert_eq!(
        version::java_name(10_000).as_deref(),
        Some("HIGHER_VERSION")
    );
    assert_eq!(version::java_name(-1), None);
    // The ordinals this server reasons about by name.
    assert_eq!(
        version::java_name(version::V5_0_0).as_deref(),
        Some("V5_0_0")
    );
    assert_eq!(
        version::java_name(version::CURRENT).as_deref(),
        Some("V5_3_3")
    );
}
