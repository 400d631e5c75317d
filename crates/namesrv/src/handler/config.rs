//! UPDATE_NAMESRV_CONFIG and GET_NAMESRV_CONFIG.

use rocketmq_wire::codes::response as resp;
use rocketmq_wire::RemotingCommand;

use super::{success, HandlerResult, SystemError};
use crate::config::parse_properties;
use crate::config_store::UpdateError;
use crate::events::{Event, EventKind};
use crate::state::State;

pub fn update(state: &State, r: &RemotingCommand) -> HandlerResult {
    let Some(body) = &r.body else {
        return Ok(success(r));
    };
    let props =
        parse_properties(body).map_err(|_| SystemError("string2Properties error".into()))?;
    match state.config.update(&props) {
        Ok(()) => {}
        Err(UpdateError::Blacklisted(key)) => {
            tracing::warn!(key, "refused a remote update of a blacklisted config key");
            return Ok(RemotingCommand::response_to(r, resp::NO_PERMISSION)
                .with_remark("Can not update config in black list."));
        }
        Err(e @ UpdateError::Write(..)) => return Err(SystemError(e.to_string())),
    }
    // Live options (acting master, order config) change what routes show.
    state.routes.invalidate();
    if !props.is_empty() {
        let keys: Vec<&str> = props.iter().map(|(k, _)| k.as_str()).collect();
        let values: Vec<String> = props.iter().map(|(k, v)| format!("{k}={v}")).collect();
        state.events.record(Event::new(
            EventKind::ConfigUpdated,
            keys.join(", "),
            values.join(", "),
        ));
    }
    Ok(success(r))
}

pub fn get(state: &State, r: &RemotingCommand) -> HandlerResult {
    let listing = state.config.settings().listing();
    Ok(success(r).with_body(listing.into_bytes()))
}
