//! What the server writes to disk and which config keys a remote peer may change: keys that
//! weaken security or name files are refused, persisted files keep their permissions and do not
//! follow planted symlinks, and custom keys survive the config rewrite.

mod support;
use support::MQNAMESRV;

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use namesrv_testkit::*;
use rocketmq_wire::acl::sign;
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;

const BLACKLIST_REMARK: &str = "Can not update config in black list.";

fn update(body: &str) -> RemotingCommand {
    RemotingCommand::request(request::UPDATE_NAMESRV_CONFIG).with_body(body.as_bytes().to_vec())
}

async fn listing(client: &Client) -> String {
    let resp = call(
        client,
        RemotingCommand::request(request::GET_NAMESRV_CONFIG),
    )
    .await;
    assert_eq!(resp.code, response::SUCCESS);
    body_text(&resp)
}

async fn config_map(client: &Client) -> BTreeMap<String, String> {
    namesrv::config::parse_properties(listing(client).await.as_bytes())
        .unwrap()
        .into_iter()
        .collect()
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn keys_that_weaken_security_or_name_files_are_refused_remotely_and_nothing_is_persisted() {
    let certs = tempfile::tempdir().unwrap();
    write_cert(certs.path());
    // The file's own blacklist leaves out every default entry: the refusals must not depend
    // on it.
    let server = MQNAMESRV.start_with(&format!(
        "{}\ntls.server.need.client.auth=optional\ntls.server.trustCertPath={}\n\
         tls.server.futureSetting=on\nconfigBlackList=orderMessageEnable\n\
         advertisedAddresses=127.0.0.1:9876\nhttpBindAddress=127.0.0.1",
        tls_props(certs.path(), "permissive"),
        certs.path().join("server.pem").display()
    ));
    let client = server.client().await;
    let on_disk = std::fs::read(&server.config).unwrap();
    let before = listing(&client).await;
    let backup = server.config.with_extension("conf.bak");

    let attempts = [
        ("tls.server.mode", "disabled"),
        ("tls.server.need.client.auth", "none"),
        ("tls.server.certPath", "/tmp/attacker.pem"),
        ("tls.server.keyPath", "/tmp/attacker.key"),
        ("tls.server.trustCertPath", "/tmp/attacker-ca.pem"),
        ("tls.server.futureSetting", "off"),
        ("tls.client.anything", "x"),
        ("authenticationEnabled", "false"),
        ("authCredentialsPath", "/tmp/attacker.properties"),
        ("configStorePath", "/tmp/attacker.conf"),
        ("kvConfigPath", "/tmp/attacker-kv.json"),
        ("routeSnapshotPath", "/tmp/attacker-routes.json"),
        ("logDir", "/tmp/attacker-logs"),
        ("rocketmqHome", "/tmp/attacker-home"),
        ("configBlackList", ""),
        ("advertisedAddresses", "203.0.113.7:9876"),
        ("bindAddress", "0.0.0.0"),
        ("httpBindAddress", "0.0.0.0"),
    ];
    for (key, value) in attempts {
        for body in [
            format!("{key}={value}\n"),
            format!("productEnvName=mixed\n{key}={value}\n"),
        ] {
            let resp = call(&client, update(&body)).await;
            assert_eq!(resp.code, response::NO_PERMISSION, "{body:?}: {resp:?}");
            assert_eq!(resp.remark.as_deref(), Some(BLACKLIST_REMARK), "{body:?}");
            assert_eq!(
                listing(&client).await,
                before,
                "{body:?} changed the config"
            );
            assert_eq!(
                std::fs::read(&server.config).unwrap(),
                on_disk,
                "{body:?} rewrote the config file"
            );
            assert!(!backup.exists(), "{body:?} rewrote the config file");
        }
    }

    // The file's own blacklist still counts, and other keys still update and persist.
    let resp = call(&client, update("orderMessageEnable=true\n")).await;
    assert_eq!(resp.code, response::NO_PERMISSION);
    let resp = call(&client, update("productEnvName=changed\n")).await;
    assert_eq!(resp.code, response::SUCCESS);
    let persisted = std::fs::read_to_string(&server.config).unwrap();
    assert!(
        persisted.contains("\nproductEnvName=changed\n"),
        "{persisted}"
    );
    assert!(
        persisted.contains("\ntls.server.mode=permissive\n"),
        "{persisted}"
    );
}

#[tokio::test]
async fn an_enforcing_server_refuses_a_remote_downgrade_and_refuses_plaintext_after_a_restart() {
    let certs = tempfile::tempdir().unwrap();
    let cert = write_cert(certs.path());
    let home = tempfile::tempdir().unwrap();
    let mut server = MQNAMESRV.start_in(home.path(), &tls_props(certs.path(), "enforcing"));
    assert!(!plaintext_served(&server.addr).await);
    let client = tls_client(&server.addr, &cert).await.unwrap();
    for downgrade in ["tls.server.mode=permissive\n", "tls.server.mode=disabled\n"] {
        let resp = call(&client, update(downgrade)).await;
        assert_eq!(resp.code, response::NO_PERMISSION, "{downgrade:?}");
        assert_eq!(resp.remark.as_deref(), Some(BLACKLIST_REMARK));
    }
    // An accepted update rewrites the file the restart reads.
    let resp = call(&client, update("productEnvName=after-downgrade-attempt\n")).await;
    assert_eq!(resp.code, response::SUCCESS);
    server.terminate();

    let server = MQNAMESRV.resume_in(home.path());
    assert!(
        !plaintext_served(&server.addr).await,
        "plaintext served after a restart"
    );
    let client = tls_client(&server.addr, &cert).await.unwrap();
    let config = config_map(&client).await;
    assert_eq!(config["tls.server.mode"], "enforcing");
    assert_eq!(config["productEnvName"], "after-downgrade-attempt");
}

#[tokio::test]
async fn a_config_file_locked_to_0600_stays_0600_after_a_remote_update() {
    let server = MQNAMESRV.start();
    std::fs::set_permissions(&server.config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let client = server.client().await;
    let resp = call(&client, update("productEnvName=locked\n")).await;
    assert_eq!(resp.code, response::SUCCESS);
    assert!(std::fs::read_to_string(&server.config)
        .unwrap()
        .contains("\nproductEnvName=locked\n"));
    assert_eq!(mode_of(&server.config), 0o600);
}

#[tokio::test]
async fn a_symlink_planted_at_the_kv_backup_leaves_its_target_untouched() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    assert_eq!(
        call(&client, put_kv_request("ns", "k", "first")).await.code,
        response::SUCCESS
    );
    let kv = server.home.join("namesrv/kvConfig.json");
    assert!(kv.exists());
    let victim = server.home.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let bak = server.home.join("namesrv/kvConfig.json.bak");
    let _ = std::fs::remove_file(&bak);
    symlink(&victim, &bak).unwrap();

    assert_eq!(
        call(&client, put_kv_request("ns", "k", "second"))
            .await
            .code,
        response::SUCCESS
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(!std::fs::symlink_metadata(&bak).unwrap().is_symlink());
    assert!(std::fs::read_to_string(&bak).unwrap().contains("first"));
    assert!(std::fs::read_to_string(&kv).unwrap().contains("second"));
}

#[tokio::test]
async fn temp_files_left_by_a_killed_server_are_removed_at_start() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("namesrv");
    std::fs::create_dir_all(&dir).unwrap();
    let stale = [
        dir.join("kvConfig.json.tmp4242"),
        dir.join("kvConfig.json.tmp4242-0123456789abcdef"),
        dir.join("routeSnapshot.json.tmp17-00ff00ff00ff00ff"),
        home.path().join("namesrv.conf.tmp99-abcdef0123456789"),
    ];
    for path in &stale {
        std::fs::write(path, "half written").unwrap();
    }
    let unrelated = dir.join("kvConfig.json.tmp-notes");
    std::fs::write(&unrelated, "keep").unwrap();

    let server = MQNAMESRV.start_in(home.path(), "");
    for path in &stale {
        assert!(!path.exists(), "{} left behind", path.display());
    }
    assert!(unrelated.exists());
    assert!(plaintext_served(&server.addr).await);
}

#[tokio::test]
async fn custom_keys_with_escaped_characters_survive_an_update_and_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let custom = [
        ("myCustom key", "one"),
        ("foo:bar", "two"),
        ("#hashkey", "three"),
        ("a=b", "four"),
        ("!bang", "five"),
    ];
    let mut server = MQNAMESRV.start_in(
        home.path(),
        "myCustom\\ key=one\nfoo\\:bar=two\n\\#hashkey=three\na\\=b=four\n\\!bang=five",
    );
    let client = server.client().await;
    let loaded = config_map(&client).await;
    for (k, v) in custom {
        assert_eq!(
            loaded.get(k).map(String::as_str),
            Some(v),
            "{k:?} as loaded"
        );
    }
    assert_eq!(
        call(&client, update("productEnvName=unrelated\n"))
            .await
            .code,
        response::SUCCESS
    );
    server.terminate();

    let server = MQNAMESRV.resume_in(home.path());
    let client = server.client().await;
    let reloaded = config_map(&client).await;
    assert_eq!(reloaded["productEnvName"], "unrelated");
    for (k, v) in custom {
        assert_eq!(
            reloaded.get(k).map(String::as_str),
            Some(v),
            "{k:?} after the rewrite:\n{}",
            std::fs::read_to_string(&server.config).unwrap()
        );
    }
    let custom_keys: Vec<&String> = reloaded
        .keys()
        .filter(|k| !loaded.contains_key(k.as_str()))
        .collect();
    assert!(custom_keys.is_empty(), "keys appeared: {custom_keys:?}");
}

#[tokio::test]
async fn an_unknown_access_key_and_a_wrong_secret_get_the_same_answer() {
    let server = MQNAMESRV.start_authenticated("admin=secret-1\n", "");
    let client = server.client().await;
    let unknown = call(
        &client,
        sign(put_kv_request("ns", "k", "v"), "intruder", "secret-1"),
    )
    .await;
    let wrong_secret = call(
        &client,
        sign(put_kv_request("ns", "k", "v"), "admin", "guess"),
    )
    .await;
    assert_eq!(unknown.code, response::NO_PERMISSION);
    assert_eq!(
        (unknown.code, &unknown.remark),
        (wrong_secret.code, &wrong_secret.remark)
    );
    let remark = unknown.remark.unwrap_or_default();
    assert!(
        !remark.contains("admin") && !remark.contains("intruder"),
        "{remark}"
    );
    assert_eq!(
        call(
            &client,
            sign(put_kv_request("ns", "k", "v"), "admin", "secret-1")
        )
        .await
        .code,
        response::SUCCESS,
        "the right key and secret still write"
    );
}
