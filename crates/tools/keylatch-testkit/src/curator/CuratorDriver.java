// A driver for Apache Curator's own recipes, for keylatch's interoperability tests.
// Compiled by keylatch-testkit with javac at test time (crates/tools/keylatch-testkit/src/curator.rs).
//
// Usage: java CuratorDriver CONNECT_STRING LOCK_PATH [USER:PASSWORD]
// (digest credentials for the session when the third argument is given)
// Reads one command a line on stdin and answers one line on stdout. Every recipe is on
// LOCK_PATH, made at its first command:
//   lock / try MILLIS / unlock      InterProcessMutex: "locked", "timeout", "unlocked"
//   read / try-read MILLIS / unread InterProcessReadWriteLock's read lock: "read", "timeout",
//                                   "unread"
//   write / try-write MILLIS / unwrite  its write lock: "written", "timeout", "unwritten"
//   sem MAX                         InterProcessSemaphoreV2 with MAX leases: "sem"
//   acquire / try-acquire MILLIS / release  one lease (release: the latest): "acquired",
//                                   "timeout", "released"
//   revocable                       on a thread of its own: an InterProcessMutex made revocable
//                                   (makeRevocable) whose listener lets the thread release:
//                                   "revocable-locked" once held, then, when a revoke request
//                                   comes, "revocable-revoked" and "revocable-unlocked"
//   revoke                          Revoker.attemptRevoke on the first of the mutex's
//                                   participant nodes: "revoke-sent NODE" or "revoke-none"
//   count COUNT_PATH SEED           a SharedCount on COUNT_PATH (seeded with SEED if new),
//                                   started: "count N" (its value)
//   set-count N                     SharedCount.setCount: "count N"
//   sem-count                       InterProcessSemaphoreV2 whose maximum is the SharedCount
//                                   (its SharedCountReader constructor): "sem"
//   version                         Curator's version, from the recipes jar's pom.properties:
//                                   "version 5.4.0" ("version unknown" without it)
//   quit                            "bye", then exits
// A failure is answered "error <message>". "ready" is printed once the session is connected.
// Curator's defaults are kept: the default ACL provider (OPEN_ACL_UNSAFE), no namespace.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.framework.recipes.shared.SharedCount;
import java.util.Collection;
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

public final class CuratorDriver {
    public static void main(String[] args) throws Exception {
        CuratorFrameworkFactory.Builder builder = CuratorFrameworkFactory.builder()
            .connectString(args[0])
            .sessionTimeoutMs(10_000)
            .connectionTimeoutMs(5_000)
            .retryPolicy(new RetryOneTime(100));
        if (args.length > 2) {
            builder = builder.authorization("digest", args[2].getBytes("UTF-8"));
        }
        CuratorFramework client = builder.build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.out.println("error not connected");
            System.exit(2);
        }
        String path = args[1];
        InterProcessMutex mutex = null;
        InterProcessReadWriteLock rw = null;
        InterProcessSemaphoreV2 semaphore = null;
        Deque<Lease> leases = new ArrayDeque<>();
        SharedCount count = null;
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            try {
                String command = words[0];
                if (mutex == null && (command.equals("lock") || command.equals("try"))) {
                    mutex = new InterProcessMutex(client, path);
                }
                if (rw == null && command.matches("(try-)?(read|write)|unread|unwrite")) {
                    rw = new InterProcessReadWriteLock(client, path);
                }
                switch (command) {
                    case "lock":
                        mutex.acquire();
                        System.out.println("locked");
                        break;
                    case "try":
                        boolean got = mutex.acquire(Long.parseLong(words[1]), TimeUnit.MILLISECONDS);
                        System.out.println(got ? "locked" : "timeout");
                        break;
                    case "unlock":
                        mutex.release();
                        System.out.println("unlocked");
                        break;
                    case "read":
                        rw.readLock().acquire();
                        System.out.println("read");
                        break;
                    case "try-read":
                        boolean r = rw.readLock().acquire(Long.parseLong(words[1]), TimeUnit.MILLISECONDS);
                        System.out.println(r ? "read" : "timeout");
                        break;
                    case "unread":
                        rw.readLock().release();
                        System.out.println("unread");
                        break;
                    case "write":
                        rw.writeLock().acquire();
                        System.out.println("written");
                        break;
                    case "try-write":
                        boolean w = rw.writeLock().acquire(Long.parseLong(words[1]), TimeUnit.MILLISECONDS);
                        System.out.println(w ? "written" : "timeout");
                        break;
                    case "unwrite":
                        rw.writeLock().release();
                        System.out.println("unwritten");
                        break;
                    case "sem":
                        semaphore = new InterProcessSemaphoreV2(client, path, Integer.parseInt(words[1]));
                        System.out.println("sem");
                        break;
                    case "acquire":
                        leases.push(semaphore.acquire());
                        System.out.println("acquired");
                        break;
                    case "try-acquire":
                        Lease lease = semaphore.acquire(Long.parseLong(words[1]), TimeUnit.MILLISECONDS);
                        if (lease != null) {
                            leases.push(lease);
                        }
                        System.out.println(lease != null ? "acquired" : "timeout");
                        break;
                    case "release":
                        semaphore.returnLease(leases.pop());
                        System.out.println("released");
                        break;
                    case "revocable": {
                        final InterProcessMutex revocable = new InterProcessMutex(client, path);
                        final CountDownLatch asked = new CountDownLatch(1);
                        revocable.makeRevocable(lock -> asked.countDown());
                        Thread holder = new Thread(() -> {
                            try {
                                revocable.acquire();
                                say("revocable-locked");
                                asked.await();
                                say("revocable-revoked");
                                revocable.release();
                                say("revocable-unlocked");
                            } catch (Exception e) {
                                say("error " + e);
                            }
                        });
                        holder.setDaemon(true);
                        holder.start();
                        break;
                    }
                    case "revoke": {
                        Collection<String> nodes = new InterProcessMutex(client, path).getParticipantNodes();
                        if (nodes.isEmpty()) {
                            System.out.println("revoke-none");
                        } else {
                            String node = nodes.iterator().next();
                            Revoker.attemptRevoke(client, node);
                            System.out.println("revoke-sent " + node);
                        }
                        break;
                    }
                    case "count":
                        count = new SharedCount(client, words[1], Integer.parseInt(words[2]));
                        count.start();
                        System.out.println("count " + count.getCount());
                        break;
                    case "set-count":
                        count.setCount(Integer.parseInt(words[1]));
                        System.out.println("count " + words[1]);
                        break;
                    case "sem-count":
                        semaphore = new InterProcessSemaphoreV2(client, path, count);
                        System.out.println("sem");
                        break;
                    case "version": {
                        java.util.Properties pom = new java.util.Properties();
                        java.io.InputStream stream = InterProcessMutex.class.getResourceAsStream(
                            "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties");
                        if (stream != null) {
                            pom.load(stream);
                        }
                        System.out.println("version " + pom.getProperty("version", "unknown"));
                        break;
                    }
                    case "quit":
                        System.out.println("bye");
                        System.out.flush();
                        client.close();
                        System.exit(0);
                        break;
                    default:
                        System.out.println("error unknown command " + words[0]);
                }
            } catch (Exception e) {
                System.out.println("error " + e);
            }
            synchronized (System.out) {
                System.out.flush();
            }
        }
        client.close();
    }

    private static void say(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }
}
