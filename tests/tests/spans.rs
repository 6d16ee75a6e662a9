//! Each acquisition is a `keylatch.acquire` span that names the primitive, the lock, the owner
//! and how it ended; its "acquisition ended" event is emitted inside it.

use keylatch_tests::{capture, client, server, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_span_names_primitive_lock_owner_and_outcome() {
    let captured = capture(tracing::Level::DEBUG);

    let server = server();
    let client = client(&server).await;
    let name = unique("spanned");
    let lock = client.lock(&name);
    let guard = lock.lock().await.unwrap();
    let owner = guard.owner_id().to_string();
    // A second owner is refused at once: its span ends "timed_out".
    assert!(lock.try_lock().await.unwrap().is_none());
    guard.unlock().await.unwrap();
    let fair = unique("spanned-fair");
    let fair_guard = client.fair_lock(&fair).lock().await.unwrap();
    let fair_owner = fair_guard.owner_id().to_string();
    fair_guard.unlock().await.unwrap();
    client.shutdown().await.unwrap();

    let text = captured.text();
    let ended: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("acquisition ended"))
        .collect();
    for line in &ended {
        println!("{line}");
    }
    let acquired = ended
        .iter()
        .find(|l| l.contains(&format!("owner={owner}")))
        .expect("the acquisition's span names its owner");
    assert!(acquired.contains("keylatch.acquire{"), "{acquired}");
    assert!(acquired.contains("primitive=\"reentrant\""), "{acquired}");
    assert!(acquired.contains(&name), "{acquired}");
    assert!(acquired.contains("outcome=\"acquired\""), "{acquired}");
    assert!(
        ended
            .iter()
            .any(|l| l.contains(&name) && l.contains("outcome=\"timed_out\"")),
        "the refused attempt's span ended timed_out"
    );
    let fair_line = ended
        .iter()
        .find(|l| l.contains(&format!("owner={fair_owner}")))
        .expect("the fair lock's span names its owner");
    assert!(fair_line.contains("primitive=\"fair\""), "{fair_line}");
}
