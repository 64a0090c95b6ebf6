//! The usage report: totals per group (key, agent, model, provider, day or
//! session) over a time range, from `usage_record`.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::storage::{Db, DbError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "UsageGroupBy")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "UsageGroupBy"))]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    Key,
    Agent,
    Model,
    Provider,
    Day,
    Session,
}

impl GroupBy {
    pub const NAMES: &'static str = "key, agent, model, provider, day, session";

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "key" => Self::Key,
            "agent" => Self::Agent,
            "model" => Self::Model,
            "provider" => Self::Provider,
            "day" => Self::Day,
            "session" => Self::Session,
            _ => return None,
        })
    }

    /// The stored field (or expression) a group is named by.
    fn field(self) -> &'static str {
        match self {
            Self::Key => "key_id",
            Self::Agent => "agent",
            Self::Model => "string::concat(provider, '/', model)",
            Self::Provider => "provider",
            Self::Day => "day",
            Self::Session => "session",
        }
    }
}

/// What to report: `[from, to)` as stored stamps, grouped, optionally one key's only.
#[derive(Debug, Clone)]
pub struct UsageQuery {
    pub from: String,
    pub to: String,
    pub group_by: GroupBy,
    pub key_id: Option<String>,
}

/// One group's totals.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "UsageRow")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "UsageRow"))]
pub struct ReportRow {
    /// The key id, agent, `provider/model`, provider, day or session; `null`
    /// for calls without one (no agent, no session, no key).
    pub group: Option<String>,
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
    /// USD of the calls with a known price: `0` with no calls, `null` when
    /// there were calls and none had a price.
    pub cost_usd: Option<f64>,
    /// Calls whose model has no price (their cost is unknown, not 0).
    pub unpriced_requests: u64,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "UsageReport")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "UsageReport"))]
pub struct Report {
    pub object: &'static str,
    pub from: String,
    pub to: String,
    pub group_by: GroupBy,
    /// Groups, most expensive first.
    pub data: Vec<ReportRow>,
    /// All groups together.
    pub total: ReportRow,
}

#[derive(Deserialize)]
struct Sums {
    #[serde(default)]
    grp: Option<String>,
    requests: u64,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
    priced_usd: Option<f64>,
    priced: u64,
}

impl Sums {
    fn into_row(self) -> ReportRow {
        ReportRow {
            group: self.grp,
            requests: self.requests,
            prompt_tokens: self.prompt_tokens.unwrap_or(0),
            completion_tokens: self.completion_tokens.unwrap_or(0),
            cached_tokens: self.cached_tokens.unwrap_or(0),
            cache_write_tokens: self.cache_write_tokens.unwrap_or(0),
            reasoning_tokens: self.reasoning_tokens.unwrap_or(0),
            // Nothing asked, nothing spent: $0. Calls none of which had a price: unknown.
            cost_usd: (self.priced > 0 || self.requests == 0).then(|| self.priced_usd.unwrap_or(0.0)),
            unpriced_requests: self.requests.saturating_sub(self.priced),
        }
    }
}

pub async fn report(db: &Db, query: &UsageQuery) -> Result<Report, DbError> {
    let filter = if query.key_id.is_some() {
        "WHERE at >= $from AND at < $to AND key_id = $key"
    } else {
        "WHERE at >= $from AND at < $to"
    };
    let sums = "math::sum(requests) AS requests, math::sum(prompt_tokens) AS prompt_tokens, \
        math::sum(completion_tokens) AS completion_tokens, math::sum(cached_tokens) AS cached_tokens, \
        math::sum(cache_write_tokens) AS cache_write_tokens, math::sum(reasoning_tokens) AS reasoning_tokens, \
        math::sum(priced_usd) AS priced_usd, math::sum(priced_requests) AS priced";
    let sql = format!(
        "SELECT {field} AS grp, {sums} FROM usage_record {filter} GROUP BY grp;
         SELECT {sums} FROM usage_record {filter} GROUP ALL;",
        field = query.group_by.field(),
    );
    let vars = json!({"from": query.from, "to": query.to, "key": query.key_id});
    let mut response = db.execute(&sql, vars).await?;
    let mut data: Vec<ReportRow> = Db::take_rows::<Sums>(&mut response, 0)?
        .into_iter()
        .map(Sums::into_row)
        .collect();
    data.sort_by(|a, b| {
        b.cost_usd
            .unwrap_or(-1.0)
            .total_cmp(&a.cost_usd.unwrap_or(-1.0))
            .then(b.requests.cmp(&a.requests))
    });
    let total = Db::take_rows::<Sums>(&mut response, 1)?
        .into_iter()
        .next()
        .map_or_else(empty_row, Sums::into_row);
    Ok(Report {
        object: "usage.report",
        from: query.from.clone(),
        to: query.to.clone(),
        group_by: query.group_by,
        data,
        total,
    })
}

fn empty_row() -> ReportRow {
    ReportRow {
        group: None,
        requests: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
        cached_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        cost_usd: Some(0.0),
        unpriced_requests: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::{Record, Row};
    use super::*;
    use crate::providers::{Attribution, ModelRef, Usage};

    #[tokio::test]
    async fn groups_sum_and_keep_unknown_costs_unknown() {
        let db = Db::scratch().await;
        let who = Attribution {
            key: Some("k1".into()),
            ..Attribution::default()
        };
        let target = |model: &str| ModelRef {
            provider: "p".into(),
            model: model.into(),
        };
        let rows: Vec<Row> = [
            Record::new(&who, &target("priced"), &Usage::new(10, 5), Some(0.25)),
            Record::new(&who, &target("priced"), &Usage::new(1, 1), Some(0.5)),
            Record::new(
                &Attribution::default(),
                &target("free-for-all"),
                &Usage::new(3, 4),
                None,
            ),
        ]
        .into_iter()
        .map(Row::from)
        .collect();
        db.execute(
            "INSERT INTO usage_record $rows",
            serde_json::json!({"rows": rows}),
        )
        .await
        .unwrap();
        let query = |group_by, key_id: Option<&str>| UsageQuery {
            from: "2000-01-01T00:00:00.000000Z".into(),
            to: "2999-01-01T00:00:00.000000Z".into(),
            group_by,
            key_id: key_id.map(String::from),
        };
        let report = report(&db, &query(GroupBy::Model, None)).await.unwrap();
        assert_eq!(report.data.len(), 2);
        let priced = &report.data[0];
        assert_eq!(priced.group.as_deref(), Some("p/priced"));
        assert_eq!(
            (priced.requests, priced.prompt_tokens, priced.completion_tokens),
            (2, 11, 6)
        );
        assert_eq!(priced.cost_usd, Some(0.75));
        let unknown = &report.data[1];
        assert_eq!(unknown.cost_usd, None);
        assert_eq!(unknown.unpriced_requests, 1);
        assert_eq!(report.total.requests, 3);
        assert_eq!(report.total.cost_usd, Some(0.75));
        assert_eq!(report.total.unpriced_requests, 1);

        let by_key = super::report(&db, &query(GroupBy::Key, None)).await.unwrap();
        let groups: Vec<Option<&str>> = by_key.data.iter().map(|r| r.group.as_deref()).collect();
        assert_eq!(groups, [Some("k1"), None]);
        let own = super::report(&db, &query(GroupBy::Key, Some("k1")))
            .await
            .unwrap();
        assert_eq!(own.total.requests, 2);
    }

    #[tokio::test]
    async fn no_traffic_costs_nothing_rather_than_unknown() {
        let db = Db::scratch().await;
        let report = report(
            &db,
            &UsageQuery {
                from: "2000-01-01T00:00:00.000000Z".into(),
                to: "2999-01-01T00:00:00.000000Z".into(),
                group_by: GroupBy::Day,
                key_id: None,
            },
        )
        .await
        .unwrap();
        assert!(report.data.is_empty());
        assert_eq!(report.total.requests, 0);
        assert_eq!(report.total.cost_usd, Some(0.0));
    }
}
