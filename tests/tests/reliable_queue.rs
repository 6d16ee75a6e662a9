//! The delayed queue's reliable mode against a real server: consumer processes SIGKILLed in
//! the middle of their work lose nothing (every element is delivered at least once and
//! acknowledged exactly once), a poison element ends in the dead-letter list, and a late
//! acknowledgement is refused.
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keylatch::queue::Utf8;
use keylatch_tests::{client, server, unique};

/// Consumer processes, killed on drop whatever happened.
struct Consumers {
    children: Vec<Option<Child>>,
    lines: mpsc::Sender<(usize, String)>,
}

impl Consumers {
    fn spawn(&mut self, slot: usize, url: &str, name: &str) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keylatch-test-queue-consumer"))
            .args([url, name, "1500", "3", "150"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let tx = self.lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((slot, line));
            }
        });
        self.children[slot] = Some(child);
    }

    fn kill(&mut self, slot: usize) {
        if let Some(mut child) = self.children[slot].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn exited(&mut self, slot: usize) -> bool {
        match &mut self.children[slot] {
            None => true,
            Some(child) => child.try_wait().unwrap().is_some(),
        }
    }
}

impl Drop for Consumers {
    fn drop(&mut self) {
        for slot in 0..self.children.len() {
            self.kill(slot);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn consumers_killed_mid_processing_lose_nothing_and_the_poison_element_is_dead_lettered() {
    const ELEMENTS: usize = 40;
    const KILLS: usize = 8;
    let server = server();
    let client = client(&server).await;
    let name = unique("reliable-kill");
    let queue = client.delayed_queue::<Utf8>(&name).unwrap();
    for i in 0..ELEMENTS {
        let delay = Duration::from_millis(if i % 4 == 0 { 300 } else { 0 });
        queue.offer(&format!("e{i}"), delay).await.unwrap();
    }
    queue
        .offer(&"poison".to_owned(), Duration::ZERO)
        .await
        .unwrap();

    let (tx, rx) = mpsc::channel();
    let mut consumers = Consumers {
        children: (0..3).map(|_| None).collect(),
        lines: tx,
    };
    let mut acked: HashMap<String, usize> = HashMap::new();
    let mut killed: Vec<String> = Vec::new();
    let mut most_deliveries: HashMap<String, u32> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let counts = queue.counts().await.unwrap();
        if acked.len() == ELEMENTS && counts.dead == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stuck: {} acked, {counts:?}",
            acked.len()
        );
        for slot in 0..3 {
            if consumers.exited(slot) {
                consumers.spawn(slot, &server.url(), &name);
            }
        }
        while let Ok((slot, line)) = rx.recv_timeout(Duration::from_millis(50)) {
            let mut words = line.split(' ');
            match (words.next(), words.next(), words.next()) {
                (Some("took"), Some(value), Some(count)) => {
                    let count: u32 = count.parse().unwrap();
                    let most = most_deliveries.entry(value.to_owned()).or_default();
                    *most = (*most).max(count);
                    // In the middle of its work: SIGKILL it.
                    if killed.len() < KILLS && value != "poison" {
                        consumers.kill(slot);
                        killed.push(value.to_owned());
                    }
                }
                (Some("acked"), Some(value), None) => {
                    *acked.entry(value.to_owned()).or_default() += 1;
                }
                (Some("late"), Some(_), None) => {}
                _ => panic!("unexpected line {line:?}"),
            }
        }
    }
    assert_eq!(killed.len(), KILLS, "the consumers were not killed");
    for i in 0..ELEMENTS {
        let value = format!("e{i}");
        assert_eq!(acked.get(&value), Some(&1), "{value} acknowledged once");
    }
    for value in &killed {
        assert!(
            most_deliveries[value] >= 2,
            "{value} was taken by a killed consumer and delivered again"
        );
    }
    assert!(!acked.contains_key("poison"));
    assert_eq!(most_deliveries["poison"], 3, "poison delivered 3 times");
    assert_eq!(queue.dead_letters(10).await.unwrap(), ["poison"]);
    let counts = queue.counts().await.unwrap();
    assert_eq!(
        (
            counts.delayed,
            counts.ready,
            counts.retrying,
            counts.processing
        ),
        (0, 0, 0, 0),
        "nothing left behind: {counts:?}"
    );
    drop(consumers);
    queue.destroy().await.unwrap();
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unacknowledged_delivery_comes_back_counted_and_a_late_ack_is_refused() {
    let server = server();
    let client = client(&server).await;
    let queue = client
        .delayed_queue::<Utf8>(&unique("reliable-count"))
        .unwrap()
        .with_visibility_timeout(Duration::from_millis(300))
        .unwrap()
        .with_max_deliveries(2)
        .unwrap();
    queue.offer(&"x".to_owned(), Duration::ZERO).await.unwrap();
    let first = queue
        .poll_reliably_for(Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((first.value().as_str(), first.delivery_count()), ("x", 1));
    queue.offer(&"y".to_owned(), Duration::ZERO).await.unwrap();
    let y = queue
        .poll_reliably_for(Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert!(queue.ack(&y).await.unwrap(), "acknowledged in time");
    assert_eq!(queue.counts().await.unwrap().processing, 1);
    // Not acknowledged: it comes back once the visibility timeout passed, counted.
    let again = queue
        .poll_reliably_for(Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.value().as_str(), again.delivery_count()), ("x", 2));
    assert!(!queue.ack(&first).await.unwrap(), "a late acknowledgement");
    // Delivered the most times: dead-lettered, not delivered again; y never comes back.
    assert!(
        queue
            .poll_reliably_for(Duration::from_millis(800))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(queue.dead_letters(10).await.unwrap(), ["x"]);
    assert!(!queue.ack(&again).await.unwrap());
    let counts = queue.counts().await.unwrap();
    assert_eq!((counts.total(), counts.processing, counts.dead), (0, 0, 1));
    queue.destroy().await.unwrap();
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_reliable_take_dropped_while_its_reply_is_in_flight_delivers_its_element_again() {
    let server = server();
    let config = keylatch::Config::builder()
        .url(server.url())
        .response_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let client = keylatch::Client::connect_with(config).await.unwrap();
    let queue = client
        .delayed_queue::<Utf8>(&unique("reliable-drop"))
        .unwrap()
        .with_visibility_timeout(Duration::from_millis(500))
        .unwrap();
    queue.offer(&"only".into(), Duration::ZERO).await.unwrap();
    // Sent to a stopped server and dropped: the server runs it later, nobody gets the reply.
    server.pause().unwrap();
    let dropped = tokio::time::timeout(
        Duration::from_millis(150),
        queue.poll_reliably_for(Duration::ZERO),
    )
    .await;
    assert!(dropped.is_err(), "the server did not answer");
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.resume().unwrap();
    // At least once: after the visibility timeout it is delivered again, counted twice.
    let again = queue
        .poll_reliably_for(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the element of the dropped take was lost");
    assert_eq!(
        (again.value().as_str(), again.delivery_count()),
        ("only", 2)
    );
    assert!(queue.ack(&again).await.unwrap());
    assert_eq!(queue.counts().await.unwrap().total(), 0);
    client.shutdown().await.unwrap();
}
