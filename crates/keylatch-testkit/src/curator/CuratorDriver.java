// A driver for Apache Curator's own recipes, for keylatch's interoperability tests.
// Compiled by keylatch-testkit with javac at test time (crates/keylatch-testkit/src/curator.rs).
//
// Usage: java CuratorDriver CONNECT_STRING LOCK_PATH [USER:PASSWORD]
// (digest credentials for the session when the third argument is given)
// Reads one command a line on stdin and answers one line on stdout:
//   lock          -> "locked" once InterProcessMutex.acquire() returned
//   try MILLIS    -> "locked" or "timeout" (acquire(MILLIS, ms))
//   unlock        -> "unlocked" once release() returned
//   quit          -> "bye", then exits
// A failure is answered "error <message>". "ready" is printed once the session is connected.
// Curator's defaults are kept: the default ACL provider (OPEN_ACL_UNSAFE), no namespace.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
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
        InterProcessMutex mutex = new InterProcessMutex(client, args[1]);
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            try {
                switch (words[0]) {
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
            System.out.flush();
        }
        client.close();
    }
}
