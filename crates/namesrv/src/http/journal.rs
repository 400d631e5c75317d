//! `/journal?topic=NAME` and `/journal?broker=NAME`: what the route journal holds about a topic
//! or a broker group, with its route as it is now, as JSON. It is ROUTE_JOURNAL's answer
//! (`nsadmin explainRoute`), so that a script on the HTTP port reads what the admin tool reads.
//! The status page's search asks the same question ([`Asked`]).

use axum::extract::{Query, State as AxumState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::Http;
use crate::handler::journal::{answer, DEFAULT_LIMIT, MAX_LIMIT, MAX_NAME};
use crate::journal::Subject;

#[derive(Deserialize)]
pub(super) struct JournalQuery {
    topic: Option<String>,
    broker: Option<String>,
    /// Kept as text, so that a limit that is not a number gets this endpoint's own answer.
    limit: Option<String>,
}

/// What a question is about, owned, so that it can go to a blocking task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Asked {
    Topic(String),
    Broker(String),
}

impl Asked {
    /// The subject of a query's `topic` and `broker`: `Ok(None)` when neither names anything
    /// (an empty value names nothing, as an empty search box sends), an error that says why
    /// when both do or the name is longer than any RocketMQ accepts.
    pub(super) fn from_query(
        topic: Option<&str>,
        broker: Option<&str>,
    ) -> Result<Option<Asked>, String> {
        let given = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(str::to_string);
        let asked = match (given(topic), given(broker)) {
            (None, None) => return Ok(None),
            (Some(t), None) => Asked::Topic(t),
            (None, Some(b)) => Asked::Broker(b),
            (Some(_), Some(_)) => {
                return Err("ask about one topic or one broker group, not both".into())
            }
        };
        let len = asked.name().len();
        if len > MAX_NAME {
            // The name itself is not repeated: it can be anything, at any length.
            return Err(format!(
                "a name of {len} bytes; no topic or broker name is longer than {MAX_NAME}"
            ));
        }
        Ok(Some(asked))
    }

    pub(super) fn name(&self) -> &str {
        match self {
            Asked::Topic(n) | Asked::Broker(n) => n,
        }
    }

    pub(super) fn subject(&self) -> Subject<'_> {
        match self {
            Asked::Topic(t) => Subject::Topic(t),
            Asked::Broker(b) => Subject::Broker(b),
        }
    }
}

/// Entries asked for: [`DEFAULT_LIMIT`] unless said, and at most [`MAX_LIMIT`].
fn limit_of(v: Option<&str>) -> Result<usize, String> {
    let Some(v) = v else {
        return Ok(DEFAULT_LIMIT);
    };
    match v.parse::<usize>() {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(format!(
            "limit is a number of entries from 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})"
        )),
    }
}

fn bad_request(why: String) -> Response {
    (StatusCode::BAD_REQUEST, format!("{why}\n")).into_response()
}

pub(super) async fn json(
    AxumState(http): AxumState<Http>,
    Query(q): Query<JournalQuery>,
) -> Response {
    let asked = match Asked::from_query(q.topic.as_deref(), q.broker.as_deref()) {
        Ok(Some(asked)) => asked,
        Ok(None) => {
            return bad_request(
                "ask about one topic (/journal?topic=NAME) or one broker group \
                 (/journal?broker=NAME), with limit=N entries at most"
                    .into(),
            )
        }
        Err(why) => return bad_request(why),
    };
    let limit = match limit_of(q.limit.as_deref()) {
        Ok(limit) => limit,
        Err(why) => return bad_request(why),
    };
    // The journal's files are read, after waiting for its writer: no place for a request worker.
    rocketmq_http::json(move || answer(&http.state, asked.subject(), limit)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_names_one_topic_or_one_group_of_a_name_rocketmq_could_hold() {
        assert_eq!(Asked::from_query(None, None), Ok(None));
        assert_eq!(Asked::from_query(Some(""), Some("")), Ok(None));
        assert_eq!(
            Asked::from_query(Some("T"), Some("")),
            Ok(Some(Asked::Topic("T".into())))
        );
        assert_eq!(
            Asked::from_query(None, Some("b")),
            Ok(Some(Asked::Broker("b".into())))
        );
        assert!(Asked::from_query(Some("T"), Some("b")).is_err());
        let longest = "x".repeat(MAX_NAME);
        assert!(Asked::from_query(Some(&longest), None).is_ok());
        let over = format!("{longest}y");
        let why = Asked::from_query(None, Some(&over)).unwrap_err();
        assert!(!why.contains(&over), "the name is not echoed: {why}");
    }

    #[test]
    fn a_limit_is_a_count_of_entries_within_the_answer_s_bounds() {
        assert_eq!(limit_of(None), Ok(DEFAULT_LIMIT));
        assert_eq!(limit_of(Some("1")), Ok(1));
        assert_eq!(limit_of(Some("500")), Ok(MAX_LIMIT));
        for bad in ["0", "501", "-1", "ten", "", " 5"] {
            assert!(limit_of(Some(bad)).is_err(), "{bad:?}");
        }
    }
}
