//! Realistic wallet-outbox rows for the demo, the benchmarks and the tests: several apps, mixed
//! statuses (mostly delivered), payloads of a few hundred bytes, timestamps spread over days.
//!
//! Deterministic for a given seed (a SplitMix64 generator), so a benchmark or a test can be
//! repeated row for row.

use sqlx::MySqlPool;

use crate::db::{Context, DbError};
use crate::model::codec::{Row, Value};
use crate::model::table::TableSpec;

/// SplitMix64: small, fast and good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn hex(&mut self, len: usize) -> String {
        let mut s = String::with_capacity(len);
        while s.len() < len {
            s.push_str(&format!("{:016x}", self.next_u64()));
        }
        s.truncate(len);
        s
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct SeedPlan {
    pub apps: Vec<String>,
    pub rows: u64,
    /// Rows' `created_at_ms` fall in `[start_ms, end_ms)`.
    pub start_ms: i64,
    pub end_ms: i64,
    /// Share of rows left DELIVERED, in percent; the rest are spread over the other states.
    pub delivered_percent: u64,
    pub seed: u64,
    /// How event ids are made.
    pub event_ids: EventIds,
}

impl SeedPlan {
    /// A trial's rows, as `demo` and `migrate --seed-rows` make them: three apps over the 30
    /// days before `now_ms`, 86 % delivered, readable event ids.
    pub fn trial(rows: u64, now_ms: i64) -> Self {
        SeedPlan {
            apps: vec!["wallet-cn".into(), "wallet-sg".into(), "fun.games".into()],
            rows,
            start_ms: now_ms - 30 * 86_400_000,
            end_ms: now_ms,
            delivered_percent: 86,
            seed: 20261129,
            event_ids: EventIds::Sequential,
        }
    }
}

/// How a seed's event ids relate to its rows' order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EventIds {
    /// `evt_{index:010}_{12 hex}`: in the order rows were created, so readable in a demo (and
    /// a member table keyed by event id grows at its end).
    #[default]
    Sequential,
    /// `evt_{32 hex}`, random like a UUID: what most services write, and the worst case for any
    /// index on event ids (every insert lands somewhere else).
    Random,
}

const EVENT_TYPES: &[&str] = &[
    "WalletCredited",
    "WalletDebited",
    "BalanceFrozen",
    "BalanceUnfrozen",
    "TransferSettled",
    "GiftSent",
];
const ASSETS: &[&str] = &["COIN", "DIAMOND", "GOLD", "USD_CENT"];
const SOURCES: &[&str] = &[
    "gift",
    "recharge",
    "withdraw",
    "refund",
    "game_reward",
    "transfer",
];

/// Generates row `index` of the plan (rows are independent, so a plan can be produced in chunks).
pub fn row(plan: &SeedPlan, index: u64, rng: &mut Rng) -> Row {
    let app = &plan.apps[(index % plan.apps.len() as u64) as usize];
    let span = (plan.end_ms - plan.start_ms).max(1) as u64;
    // Spread evenly with jitter, so runs of equal timestamps appear but stay rare.
    let created = plan.start_ms
        + ((index as u128 * span as u128 / plan.rows.max(1) as u128) as i64)
        + rng.below(1_000) as i64;
    let created = created.min(plan.end_ms - 1);
    let roll = rng.below(100);
    let other = ["PENDING", "DELIVERING", "RETRYABLE", "FAILED"];
    let status = if roll < plan.delivered_percent {
        "DELIVERED"
    } else {
        other[(roll % 4) as usize]
    };
    let event_type = EVENT_TYPES[rng.below(EVENT_TYPES.len() as u64) as usize];
    let asset = ASSETS[rng.below(ASSETS.len() as u64) as usize];
    let amount = rng.below(500_000) as i64 + 1;
    let (available, frozen) = match event_type {
        "WalletDebited" => (-amount, 0),
        "BalanceFrozen" => (-amount, amount),
        "BalanceUnfrozen" => (amount, -amount),
        _ => (amount, 0),
    };
    let user_id = 10_000_000 + rng.below(5_000_000) as i64;
    let transaction_id = format!("tx_{}", rng.hex(24));
    let payload = format!(
        r#"{{"amount": {amount}, "asset": "{asset}", "balance_after": {balance}, "user_id": {user_id}, "source": {{"kind": "{source}", "room_id": {room}, "order_no": "ord{order}"}}, "memo": "{memo}", "tags": ["{app}", "v2"], "transaction_id": "{transaction_id}"}}"#,
        balance = rng.below(10_000_000),
        source = SOURCES[rng.below(SOURCES.len() as u64) as usize],
        room = rng.below(900_000) + 100_000,
        order = rng.hex(18),
        memo = if rng.below(10) == 0 {
            "补偿发放 — \\\"weekly\\\" bonus\\n"
        } else {
            "ok"
        },
    );
    let delivery = delivery(status, created, rng);
    vec![
        Value::Text(app.clone()),
        Value::Text(match plan.event_ids {
            EventIds::Sequential => format!("evt_{:010}_{}", index, rng.hex(12)),
            EventIds::Random => {
                // From the index alone, and the generator advanced as the sequential form
                // advances it, so every other column is the sequential seed's.
                let _ = rng.hex(12);
                let mut id = Rng::new(plan.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                format!("evt_{}", id.hex(32))
            }
        }),
        Value::Text(event_type.into()),
        Value::Text(transaction_id),
        Value::Text(format!("cmd_{}", rng.hex(24))),
        Value::Int(user_id),
        Value::Text(asset.into()),
        Value::Int(available),
        Value::Int(frozen),
        Value::Text(payload),
        Value::Text(status.into()),
        Value::Text(delivery.worker),
        delivery.lock_until,
        Value::Int(delivery.retries),
        delivery.next_retry,
        delivery.last_error,
        Value::Int(created),
        Value::Int(delivery.updated),
    ]
}

/// Row `index` of the plan as a room_outbox row (the room seed's columns): a protobuf-like
/// envelope of 0 to 600 bytes — some empty, some all zeros — and the same states as wallet rows.
pub(crate) fn room_row(plan: &SeedPlan, index: u64, rng: &mut Rng) -> Row {
    let wallet = row(plan, index, rng);
    let (status, created) = (wallet[10].clone(), wallet[16].clone());
    let envelope: Vec<u8> = match rng.below(20) {
        0 => Vec::new(),
        1 => vec![0; 1 + rng.below(16) as usize],
        _ => {
            let len = 8 + rng.below(600) as usize;
            // A field tag and length, then the body: enough protobuf look for `zcat | head`.
            let mut bytes = vec![0x0a, (len.min(127)) as u8];
            bytes.extend((0..len).map(|_| rng.below(256) as u8));
            bytes
        }
    };
    vec![
        wallet[0].clone(),
        wallet[1].clone(),
        Value::Text(
            ["RoomCreated", "SeatTaken", "GiftSent", "RoomClosed"][rng.below(4) as usize].into(),
        ),
        Value::Int(100_000 + rng.below(900_000) as i64),
        status,
        wallet[11].clone(),
        wallet[12].clone(),
        Value::Bytes(envelope),
        created,
        wallet[13].clone(),
        match &wallet[14] {
            Value::Null => Value::Int(0),
            v => v.clone(),
        },
        wallet[15].clone(),
        wallet[17].clone(),
    ]
}

/// The relay's bookkeeping columns of a row in `status`, as the relay leaves them.
struct Delivery {
    updated: i64,
    lock_until: Value,
    next_retry: Value,
    last_error: Value,
    retries: i64,
    worker: String,
}

fn delivery(status: &str, created: i64, rng: &mut Rng) -> Delivery {
    let updated = match status {
        "DELIVERED" | "FAILED" => created + 5 + rng.below(3_000) as i64,
        _ => created,
    };
    let (lock_until, next_retry, last_error, retries) = match status {
        "DELIVERING" => (Value::Int(updated + 30_000), Value::Int(0), Value::Null, 0),
        "RETRYABLE" => (
            Value::Null,
            Value::Int(updated + 60_000),
            Value::Text("kafka: leader not available".into()),
            1 + rng.below(4) as i64,
        ),
        "FAILED" => (
            Value::Null,
            Value::Int(updated),
            Value::Text("max retries exceeded: broker timeout".into()),
            8,
        ),
        "PENDING" => (Value::Null, Value::Int(0), Value::Null, 0),
        _ => (
            Value::Null,
            Value::Int(0),
            Value::Null,
            rng.below(20).saturating_sub(17) as i64,
        ),
    };
    let worker = if status == "PENDING" {
        String::new()
    } else {
        format!("relay-{}-{}", &rng.hex(6), rng.below(4))
    };
    Delivery {
        updated,
        lock_until,
        next_retry,
        last_error,
        retries,
        worker,
    }
}

/// Inserts rows in multi-row statements.
pub async fn insert_rows(pool: &MySqlPool, spec: &TableSpec, rows: &[Row]) -> Result<(), DbError> {
    let per_statement = (60_000 / spec.columns.len()).min(1_000);
    for chunk in rows.chunks(per_statement) {
        let refs: Vec<&Row> = chunk.iter().collect();
        crate::db::insert_rows(pool, spec, spec.name, &refs, crate::db::IfPresent::Fail)
            .await
            .context(|| format!("inserting rows into {}", spec.name))?;
    }
    Ok(())
}

/// Generates and inserts a whole plan, in chunks so memory stays small: wallet_outbox rows, or
/// room_outbox rows for that table.
pub async fn seed(pool: &MySqlPool, spec: &TableSpec, plan: &SeedPlan) -> Result<(), DbError> {
    let mut rng = Rng::new(plan.seed);
    let mut index = 0;
    while index < plan.rows {
        let end = (index + 10_000).min(plan.rows);
        let rows: Vec<Row> = match spec.name {
            "room_outbox" => (index..end).map(|i| room_row(plan, i, &mut rng)).collect(),
            _ => (index..end).map(|i| row(plan, i, &mut rng)).collect(),
        };
        insert_rows(pool, spec, &rows).await?;
        index = end;
    }
    Ok(())
}
