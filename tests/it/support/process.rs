//! Other Kafka clients (a Java consumer, librdkafka through Python) run as child processes by the interoperability
//! tests, with their output collected line by line.
//!
//! Lifetime: a [`Process`] is killed and reaped when dropped, so it never outlives its test,
//! passing or failing. It must not outlive the test binary either when that dies without
//! unwinding (abort, SIGKILL): every process runs under a small bash watcher holding the write
//! end of a pipe whose only other end is ours; when that closes — on drop, or when the kernel
//! closes our descriptors — the watcher SIGKILLs the client. That is the shared broker's
//! `--owner-pid` watchdog, for processes that do not read their stdin.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs `"$@"` with its stdin closed and SIGKILLs it once our stdin (fd 3 in the watcher) hits
/// end of file; exits with the client's status. A client that exits by itself takes the watcher
/// with it, so that no stale pid is ever signalled. The watcher writes to /dev/null so that our
/// stdout reader sees end of file once the client is gone.
const WATCHER: &str = r#"exec 3<&0 </dev/null
"$@" 3<&- &
client=$!
{ cat <&3; kill -KILL "$client"; } >/dev/null 2>&1 &
watcher=$!
exec 3<&-
wait "$client"
status=$?
kill "$watcher" 2>/dev/null
exit "$status""#;

/// How long a dropped process may take to exit once told to.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A running child process and what it printed so far.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    /// Held open for the watcher; dropping it stops the process.
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Process {
    /// Starts `program` with `args` under the watcher; `name` labels it in messages.
    pub fn spawn(name: &str, program: &str, args: &[String]) -> Process {
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(WATCHER)
            .arg(name)
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({program}): {e}"));
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Process {
            name: name.to_string(),
            stdin: child.stdin.take(),
            child,
            stdout,
            stderr,
        }
    }

    /// Runs `program` to completion within `timeout` and returns its stdout; panics with its
    /// output if it fails or takes longer.
    pub fn run(name: &str, program: &str, args: &[String], timeout: Duration) -> Vec<String> {
        let mut p = Process::spawn(name, program, args);
        let deadline = Instant::now() + timeout;
        loop {
            match p.exit_status() {
                Some(s) if s.success() => {
                    // The readers may still be draining the pipes.
                    p.wait_for_eof();
                    return p.stdout();
                }
                Some(s) => panic!("{name} failed ({s}):\n{}", p.report()),
                None if Instant::now() >= deadline => {
                    panic!("{name} still running after {timeout:?}:\n{}", p.report())
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Waits up to `timeout` for it to exit and for its output to be read to the end; its exit
    /// status, or `None` if it still runs.
    pub fn finish(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                self.wait_for_eof();
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The name it was started with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Lines printed on stdout so far.
    pub fn stdout(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    /// Lines printed on stderr so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// The records among its stdout (see [`records`]), sorted, once there are at least `n` or
    /// `timeout` has passed, whichever comes first.
    pub fn wait_for_records(&self, n: usize, timeout: Duration) -> Vec<Record> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut got = records(&self.stdout());
            got.sort();
            if got.len() >= n || Instant::now() >= deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The exit status, if it has exited.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap_or(None)
    }

    /// The last lines of its stdout and stderr and whether it still runs, for a failure message.
    pub fn report(&mut self) -> String {
        let tail = |lines: Vec<String>| {
            let skip = lines.len().saturating_sub(40);
            lines[skip..].join("\n")
        };
        let status = self
            .exit_status()
            .map_or("running".to_string(), |s| s.to_string());
        format!(
            "--- {} ({status}) stdout:\n{}\n--- stderr:\n{}\n---",
            self.name,
            tail(self.stdout()),
            tail(self.stderr())
        )
    }

    fn wait_for_eof(&self) {
        let deadline = Instant::now() + STOP_GRACE;
        while Arc::strong_count(&self.stdout) + Arc::strong_count(&self.stderr) > 2
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Closing our end makes the watcher kill the client, after which bash exits. SIGKILL to
        // bash is only the fallback: it would leave the watcher to do its job alone.
        drop(self.stdin.take());
        let deadline = Instant::now() + STOP_GRACE;
        while self.exit_status().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.exit_status().is_none() {
            eprintln!("{} did not stop within {STOP_GRACE:?}; killing it", self.name);
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Reads `pipe` line by line into a shared vector until end of file; the reader thread holds
/// the only other reference, which [`Process::wait_for_eof`] relies on.
fn collect(pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            match line {
                Ok(l) => sink.lock().unwrap().push(l),
                Err(_) => break,
            }
        }
    });
    lines
}

/// One record a consumer printed as `partition offset value`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub value: String,
}

/// The records among `lines`, skipping everything not of the form `partition offset value`.
pub fn records(lines: &[String]) -> Vec<Record> {
    lines
        .iter()
        .filter_map(|l| {
            let mut it = l.splitn(3, ' ');
            Some(Record {
                partition: it.next()?.parse().ok()?,
                offset: it.next()?.parse().ok()?,
                value: it.next()?.to_string(),
            })
        })
        .collect()
}
