//! Exclusion: tasks on two clients increment a counter with a read, a yield and a write inside
//! the lock. Any overlap loses an increment, so the final count shows it.
use keylatch::redis::AsyncCommands;
use keylatch_tests::{client, raw, server, unique};

const TASKS: usize = 8;
const ITERATIONS: u64 = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_tasks_on_two_clients_never_overlap() {
    let server = server();
    let clients = [client(&server).await, client(&server).await];
    let name = unique("exclusion");
    let counter = format!("{name}:counter");
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let lock = clients[i % 2].lock(&name);
        let mut conn = raw(&server).await;
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..ITERATIONS {
                let guard = lock.lock().await.expect("lock");
                let value: Option<u64> = conn.get(&counter).await.expect("get");
                tokio::task::yield_now().await;
                let _: () = conn
                    .set(&counter, value.unwrap_or(0) + 1)
                    .await
                    .expect("set");
                guard.unlock().await.expect("unlock");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let mut conn = raw(&server).await;
    let total: u64 = conn.get(&counter).await.expect("get");
    println!("{TASKS} tasks x {ITERATIONS} iterations: counter = {total}");
    assert_eq!(
        total,
        TASKS as u64 * ITERATIONS,
        "an increment was lost: two holders overlapped"
    );
    let exists: bool = conn.exists(&name).await.expect("exists");
    assert!(!exists, "the lock key remains after the last unlock");
    for c in &clients {
        assert_eq!(c.stats().watchdog.holds, 0);
    }
}
