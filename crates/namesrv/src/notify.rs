//! The one request a NameServer sends: NOTIFY_MIN_BROKER_ID_CHANGE, oneway, over its own
//! connection to each broker's main port.

use std::time::Duration;

use rocketmq_wire::client::Client;
use rocketmq_wire::headers::{NotifyMinBrokerIdChangeHeader, RequestHeader};
use tracing::{debug, warn};

use crate::registry::MinIdNotice;

const SEND_TIMEOUT: Duration = Duration::from_millis(300);

pub fn min_broker_id_changed(notice: MinIdNotice) {
    let request = NotifyMinBrokerIdChangeHeader {
        min_broker_id: Some(notice.min_broker_id),
        broker_name: None,
        min_broker_addr: Some(&notice.min_broker_addr),
        offline_broker_addr: notice.offline_broker_addr.as_deref(),
        ha_broker_addr: notice.ha_broker_addr.as_deref(),
    }
    .to_command();
    for addr in notice.recipients {
        let request = request.clone();
        tokio::spawn(async move {
            let sent = tokio::time::timeout(SEND_TIMEOUT, async {
                let client = Client::connect_within(&addr, SEND_TIMEOUT).await?;
                client.send_oneway(request).await?;
                Ok::<_, rocketmq_wire::client::ClientError>(())
            })
            .await;
            match sent {
                Ok(Ok(())) => debug!(%addr, "notified broker of min broker id change"),
                Ok(Err(e)) => warn!(%addr, "cannot notify broker: {e}"),
                Err(_) => warn!(%addr, "notifying broker timed out"),
            }
        });
    }
}
