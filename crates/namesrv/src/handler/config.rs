//! UPDATE_NAMESRV_CONFIG and GET_NAMESRV_CONFIG.

use std::path::PathBuf;

use rocketmq_wire::codes::response as resp;
use rocketmq_wire::RemotingCommand;

use super::{success, Failure, Reply};
use crate::config::parse_properties;
use crate::persist::write_atomically;
use crate::state::State;

pub fn update(state: &State, r: &RemotingCommand) -> Reply {
    let Some(body) = &r.body else {
        return Ok(success(r));
    };
    let props = parse_properties(body).map_err(|_| Failure("string2Properties error".into()))?;
    let _writer = state.settings_write.lock();
    let mut next = state.settings.read().clone();
    if let Some(key) = next.blacklisted(props.iter().map(|(k, _)| k.as_str())) {
        tracing::warn!(key, "refused a remote update of a blacklisted config key");
        return Ok(RemotingCommand::response_to(r, resp::NO_PERMISSION)
            .with_remark("Can not update config in black list."));
    }
    next.apply_update(&props);
    let path = PathBuf::from(&next.server.config_store_path);
    write_atomically(&path, next.listing().as_bytes())
        .map_err(|e| Failure(format!("cannot persist config to {}: {e}", path.display())))?;
    *state.settings.write() = next;
    // Live options (acting master, order config) change what routes show.
    state.routes.invalidate();
    Ok(success(r))
}

pub fn get(state: &State, r: &RemotingCommand) -> Reply {
    let listing = state.settings.read().listing();
    Ok(success(r).with_body(listing.into_bytes()))
}
