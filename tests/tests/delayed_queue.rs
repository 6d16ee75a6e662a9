//! The delayed queue against a real server: delivery in due order with no transfer task alive,
//! interoperability with Redisson's own scripts (offer, transfer, poll) in both directions and
//! with the packing of Redisson before 3.21.1, codecs, and cancel safety of a take.
use std::time::Duration;

use futures_util::StreamExt;
use keylatch::queue::{Bytes, JavaClass, JavaLong, JsonJackson, Kryo5, KryoScalar, Long, Utf8};
use keylatch::redis::AsyncCommands;
use keylatch_tests::{client, eventually, raw, server, unique};

/// Redisson's `RedissonDelayedQueue.offerAsync` script, as Redisson sends it (KEYS: the
/// destination, the timeout zset, the delay list, the channel; ARGV: the due time in ms by the
/// JVM's clock, 8 random bytes, the encoded value).
const REDISSON_OFFER: &str = "local value = struct.pack('Bc0Lc0', string.len(ARGV[2]), ARGV[2], string.len(ARGV[3]), ARGV[3]);\
redis.call('zadd', KEYS[2], ARGV[1], value);\
redis.call('rpush', KEYS[3], value);\
local v = redis.call('zrange', KEYS[2], 0, 0); \
if v[1] == value then \
redis.call('publish', KEYS[4], ARGV[1]); \
end;";

/// Redisson's transfer (`QueueTransferTask.pushTaskAsync` of `RedissonDelayedQueue`): KEYS the
/// destination, the timeout zset, the delay list; ARGV now in ms, the batch size.
const REDISSON_TRANSFER: &str = "local expiredValues = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, ARGV[2]); \
if #expiredValues > 0 then \
for i, v in ipairs(expiredValues) do \
local randomId, value = struct.unpack('Bc0Lc0', v);\
redis.call('rpush', KEYS[1], value);\
redis.call('lrem', KEYS[3], 1, v);\
end; \
redis.call('zrem', KEYS[2], unpack(expiredValues));\
end; \
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); \
if v[1] ~= nil then \
return v[2]; \
end \
return nil;";

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn keys(name: &str) -> [String; 4] {
    [
        name.to_owned(),
        format!("redisson_delay_queue_timeout:{{{name}}}"),
        format!("redisson_delay_queue:{{{name}}}"),
        format!("redisson_delay_queue_channel:{{{name}}}"),
    ]
}

#[tokio::test]
async fn elements_come_in_due_order_once_due_without_any_transfer_task() {
    let server = server();
    let client = client(&server).await;
    let queue = client.delayed_queue::<Utf8>(&unique("due-order")).unwrap();
    queue
        .offer(&"late".into(), Duration::from_millis(600))
        .await
        .unwrap();
    queue
        .offer(&"early".into(), Duration::from_millis(200))
        .await
        .unwrap();
    queue
        .offer(&"middle".into(), Duration::from_millis(400))
        .await
        .unwrap();
    // Nothing is due yet.
    assert_eq!(queue.poll().await.unwrap(), None);
    let counts = queue.counts().await.unwrap();
    assert_eq!((counts.delayed, counts.ready), (3, 0));
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(
            queue
                .poll_for(Duration::from_secs(5))
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(got, ["early", "middle", "late"]);
    assert!(queue.is_empty().await.unwrap());
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_waiting_take_wakes_for_an_earlier_offer() {
    let server = server();
    let client = client(&server).await;
    let queue = client.delayed_queue::<Long>(&unique("wake")).unwrap();
    queue.offer(&1, Duration::from_secs(60)).await.unwrap();
    let consumer = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.poll_for(Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    queue.offer(&2, Duration::from_millis(100)).await.unwrap();
    assert_eq!(consumer.await.unwrap().unwrap(), Some(2));
    assert_eq!(
        queue.len().await.unwrap(),
        1,
        "the later element stays delayed"
    );
    queue.destroy().await.unwrap();
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn elements_offered_by_redissons_script_are_taken_by_keylatch() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("from-redisson");
    let [dest, timeouts, delayed, channel] = keys(&name);
    for (value, delay) in [("b", 150u64), ("a", 50)] {
        let () = keylatch::redis::Script::new(REDISSON_OFFER)
            .key(&dest)
            .key(&timeouts)
            .key(&delayed)
            .key(&channel)
            .arg(now_ms() + delay)
            .arg(&[7u8; 8][..])
            .arg(value)
            .invoke_async(&mut conn)
            .await
            .unwrap();
    }
    let queue = client.delayed_queue::<Utf8>(&name).unwrap();
    let first = queue.poll_for(Duration::from_secs(5)).await.unwrap();
    let second = queue.poll_for(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        (first.as_deref(), second.as_deref()),
        (Some("a"), Some("b"))
    );
    // Redisson's layout is left clean: no element in the zset or the delay list.
    let left: (u64, u64) = (
        conn.zcard(&timeouts).await.unwrap(),
        conn.llen(&delayed).await.unwrap(),
    );
    assert_eq!(left, (0, 0));
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn elements_offered_by_keylatch_are_moved_by_redissons_transfer_and_read_as_redisson_reads() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("to-redisson");
    let [dest, timeouts, delayed, channel] = keys(&name);
    let mut pubsub = keylatch::redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    pubsub.subscribe(&channel).await.unwrap();
    let queue = client.delayed_queue::<Long>(&name).unwrap();
    let due = queue.offer(&-42, Duration::from_millis(100)).await.unwrap();
    // The channel's message is the due time as Redisson reads it: a long in plain decimal.
    let message: String = tokio::time::timeout(Duration::from_secs(5), pubsub.on_message().next())
        .await
        .unwrap()
        .unwrap()
        .get_payload()
        .unwrap();
    let due_ms = due
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    assert_eq!(message, due_ms.to_string());
    // The zset's score is the due time too, and Redisson's transfer moves the element once due.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let head: Option<String> = keylatch::redis::Script::new(REDISSON_TRANSFER)
        .key(&dest)
        .key(&timeouts)
        .key(&delayed)
        .arg(now_ms())
        .arg(100)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(head, None, "nothing else is delayed");
    // A Redisson consumer pops the destination list and reads LongCodec's decimal text.
    let popped: Option<String> = conn.lpop(&dest, None).await.unwrap();
    assert_eq!(popped.as_deref(), Some("-42"));
    assert_eq!(conn.llen::<_, u64>(&delayed).await.unwrap(), 0);
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_backlog_in_the_packing_before_redisson_3_21_1_drains() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("old-packing");
    let [_, timeouts, delayed, _] = keys(&name);
    // Redisson before 3.21.1 packed 'dLc0': the due time as a double, the length, the value.
    let old = "local value = struct.pack('dLc0', tonumber(ARGV[1]), string.len(ARGV[2]), ARGV[2]);\
        redis.call('zadd', KEYS[1], ARGV[1], value); redis.call('rpush', KEYS[2], value);";
    for value in ["one", "two"] {
        let () = keylatch::redis::Script::new(old)
            .key(&timeouts)
            .key(&delayed)
            .arg(now_ms())
            .arg(value)
            .invoke_async(&mut conn)
            .await
            .unwrap();
    }
    let queue = client.delayed_queue::<Utf8>(&name).unwrap();
    let mut got = vec![
        queue.poll().await.unwrap().unwrap(),
        queue.poll().await.unwrap().unwrap(),
    ];
    got.sort();
    assert_eq!(got, ["one", "two"]);
    assert_eq!(queue.len().await.unwrap(), 0);
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_value_the_codec_cannot_read_is_kept_not_lost() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("unreadable");
    let bytes = client.delayed_queue::<Bytes>(&name).unwrap();
    bytes
        .offer(&vec![0xff, 0xfe], Duration::ZERO)
        .await
        .unwrap();
    let text = bytes.with_codec::<Utf8>();
    assert!(matches!(
        text.poll().await,
        Err(keylatch::Error::Codec { .. })
    ));
    let kept: Vec<Vec<u8>> = conn
        .lrange(format!("keylatch_queue:{{{name}}}:unreadable"), 0, -1)
        .await
        .unwrap();
    assert_eq!(kept, vec![vec![0xff, 0xfe]]);
    bytes.destroy().await.unwrap();
    client.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_dropped_while_its_reply_is_in_flight_loses_no_element() {
    let server = server();
    let config = keylatch::Config::builder()
        .url(server.url())
        .response_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300))
        .settle_window(Duration::from_secs(3))
        .build()
        .unwrap();
    let client = keylatch::Client::connect_with(config).await.unwrap();
    let queue = client.delayed_queue::<Utf8>(&unique("drop-take")).unwrap();
    queue.offer(&"only".into(), Duration::ZERO).await.unwrap();
    // The take is sent to a stopped server and dropped before any reply; the server then
    // runs it (it waited in the socket) and the undo puts the element back.
    server.pause().unwrap();
    let dropped = tokio::time::timeout(Duration::from_millis(150), queue.poll()).await;
    assert!(dropped.is_err(), "the server did not answer");
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.resume().unwrap();
    let back = eventually(Duration::from_secs(10), || {
        let queue = queue.clone();
        async move { queue.len().await.ok() == Some(1) }
    })
    .await;
    assert!(back, "the element of the dropped take was lost");
    client.wait_idle().await;
    assert_eq!(queue.poll().await.unwrap().as_deref(), Some("only"));
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_written() {
    let server = server();
    let client = client(&server).await;
    let queue = client.delayed_queue::<Bytes>("").unwrap();
    assert!(matches!(
        queue.offer(&vec![1], Duration::ZERO).await,
        Err(keylatch::Error::InvalidName { .. })
    ));
    let queue = client.delayed_queue::<Bytes>(&unique("too-late")).unwrap();
    assert!(matches!(
        queue
            .offer(&vec![1], Duration::from_secs(u64::MAX / 4))
            .await,
        Err(keylatch::Error::InvalidConfig { .. })
    ));
    assert_eq!(queue.len().await.unwrap(), 0);
    client.shutdown().await.unwrap();
}

/// `Order` of crates/redis/keylatch-queue/tests/jackson/JacksonVectors.java.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Order {
    id: i64,
    name: String,
    paid: bool,
    qty: Option<i32>,
    zeta: i32,
    total: Option<JavaLong>,
}

impl JavaClass for Order {
    const JAVA_CLASS: &'static str = "JacksonVectors$Order";
}

#[tokio::test]
async fn kryo5_and_jackson_bytes_offered_by_redissons_script_are_read_and_written_alike() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("codecs");
    let [dest, timeouts, delayed, channel] = keys(&name);
    // What Redisson's Kryo5Codec writes for "é" and for 2^55 (the 9-byte varlong), and what its
    // JsonJacksonCodec writes for JacksonVectors' Order.
    let jackson = r#"{"@class":"JacksonVectors$Order","id":42,"name":"n","paid":true,"total":["java.lang.Long",5],"zeta":-7}"#;
    let values: [&[u8]; 3] = [
        &[0x03, 0x82, 0xC3, 0xA9],
        &[0x09, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
        jackson.as_bytes(),
    ];
    for (i, value) in values.iter().enumerate() {
        let () = keylatch::redis::Script::new(REDISSON_OFFER)
            .key(&dest)
            .key(&timeouts)
            .key(&delayed)
            .key(&channel)
            .arg(now_ms() + 20 * i as u64)
            .arg(&[i as u8; 8][..])
            .arg(*value)
            .invoke_async(&mut conn)
            .await
            .unwrap();
    }
    let kryo = client.delayed_queue::<Kryo5>(&name).unwrap();
    let first = kryo.poll_for(Duration::from_secs(5)).await.unwrap();
    let second = kryo.poll_for(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first, Some(KryoScalar::String("é".into())));
    assert_eq!(second, Some(KryoScalar::Long(1 << 55)));
    let json = kryo.with_codec::<JsonJackson<Order>>();
    let order = json
        .poll_for(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (order.id, order.total, order.qty),
        (42, Some(JavaLong(5)), None)
    );
    // keylatch's offers store the same bytes: Redisson's transfer moves them to the list.
    kryo.offer(&KryoScalar::String("é".into()), Duration::ZERO)
        .await
        .unwrap();
    json.offer(&order, Duration::ZERO).await.unwrap();
    let () = keylatch::redis::Script::new(REDISSON_TRANSFER)
        .key(&dest)
        .key(&timeouts)
        .key(&delayed)
        .arg(now_ms() + 1000)
        .arg(100)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    let moved: Vec<Vec<u8>> = conn.lrange(&dest, 0, -1).await.unwrap();
    let mut expected = vec![values[0].to_vec(), jackson.as_bytes().to_vec()];
    let mut moved_sorted = moved.clone();
    moved_sorted.sort();
    expected.sort();
    assert_eq!(moved_sorted, expected);
    kryo.destroy().await.unwrap();
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_lean_layout_keeps_the_delay_list_empty_and_is_still_delivered_by_everyone() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("lean");
    let [dest, timeouts, delayed, _] = keys(&name);
    let queue = client
        .delayed_queue::<Utf8>(&name)
        .unwrap()
        .with_lean_layout();
    for value in ["a", "b", "c"] {
        queue.offer(&value.into(), Duration::ZERO).await.unwrap();
    }
    queue
        .offer(&"later".into(), Duration::from_secs(3600))
        .await
        .unwrap();
    let lens: (u64, u64) = (
        conn.zcard(&timeouts).await.unwrap(),
        conn.llen(&delayed).await.unwrap(),
    );
    assert_eq!(lens, (4, 0), "nothing in the delay list");
    assert!(queue.contains(&"later".into()).await.unwrap());
    assert!(queue.remove(&"b".into()).await.unwrap());
    assert!(!queue.contains(&"b".into()).await.unwrap());
    // Redisson's transfer moves lean elements (its LREM finds nothing and costs nothing).
    let () = keylatch::redis::Script::new(REDISSON_TRANSFER)
        .key(&dest)
        .key(&timeouts)
        .key(&delayed)
        .arg(now_ms() + 1000)
        .arg(100)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    let mut moved: Vec<String> = conn.lrange(&dest, 0, -1).await.unwrap();
    moved.sort();
    assert_eq!(moved, ["a", "c"]);
    assert!(queue.poll().await.unwrap().is_some());
    assert!(queue.poll().await.unwrap().is_some());
    assert_eq!(queue.poll().await.unwrap(), None);
    assert_eq!(queue.len().await.unwrap(), 1);
    queue.destroy().await.unwrap();
    client.shutdown().await.unwrap();
}
