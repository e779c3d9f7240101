//! A small chat hub on magpie's processes.
//!
//! - `hub` (registered by name) keeps the members of each room, answers
//!   `Join` calls with the room's size, broadcasts lines, and monitors every
//!   member so that a session that ends (or crashes) is announced as gone.
//! - `lobby` spawns one `session` child per user. A session joins a room
//!   with a call, "types" with sleeps on the timer wheel, sends each line
//!   through a `moderate` command (a handler that runs on its own thread, as
//!   a call to an outside service would) and says it.
//! - One session has a bug and panics on its second line: the hub learns it
//!   through its monitor, the room is told, everyone else chats on.
//! - At the end `shutdown` cancels everyone: sessions say goodbye and close
//!   before the lobby that spawned them.
//!
//! Run: `cargo run --release -p magpie-runtime --example chat_hub`

use std::collections::BTreeMap;
use std::time::Duration;

use magpie_runtime::process::{
    Command, Event, Events, InitError, Outcome, Pid, Process, ProcessRuntime, Relation,
    SpawnOptions, StepOutput,
};

/// Everything that travels between chat processes.
#[derive(Debug)]
enum Chat {
    /// Call to the hub: join `room` (the reply is `Size`).
    Join { room: String, nick: String },
    /// The hub's reply to `Join`.
    Size(usize),
    /// A line for everyone in `room`.
    Say { room: String, text: String },
    /// A line, as delivered to a member.
    Line { from: String, text: String },
    /// Input of the lobby's entry point and of the `moderate` command.
    Text(String),
}

/// Tags the sessions use for their yields.
const JOIN: u64 = 1;
const TYPE: u64 = 2;
const MODERATE: u64 = 3;

// ---------------------------------------------------------------------------

#[derive(Default)]
struct Hub {
    rooms: BTreeMap<String, Vec<(Pid, String)>>,
}

impl Hub {
    fn broadcast(&self, out: &mut StepOutput<'_, Chat>, room: &str, from: &str, text: &str) {
        for (pid, _) in self.rooms.get(room).into_iter().flatten() {
            let line = Chat::Line {
                from: from.to_string(),
                text: text.to_string(),
            };
            // A member that ended meanwhile is simply skipped.
            let _ = out.send(*pid, line);
        }
    }
}

impl Process<Chat> for Hub {
    fn init(&mut self, method: &str, _input: Option<Chat>) -> Result<(), InitError> {
        match method {
            "serve" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: Events<'_, Chat>, out: &mut StepOutput<'_, Chat>) {
        for event in events {
            match event {
                Event::Message {
                    from: Some(from),
                    msg: Chat::Join { room, nick },
                    reply,
                } => {
                    out.monitor(from);
                    self.broadcast(out, &room, "hub", &format!("{nick} joined"));
                    let members = self.rooms.entry(room).or_default();
                    members.push((from, nick));
                    if let Some(reply) = reply {
                        let _ = reply.reply(Chat::Size(members.len()));
                    }
                }
                Event::Message {
                    from: Some(from),
                    msg: Chat::Say { room, text },
                    ..
                } => {
                    let nick = self
                        .rooms
                        .get(&room)
                        .and_then(|m| m.iter().find(|(p, _)| *p == from).map(|(_, n)| n.clone()));
                    if let Some(nick) = nick {
                        self.broadcast(out, &room, &nick, &text);
                    }
                }
                Event::Exit(notice) if notice.relation == Relation::Monitor => {
                    let mut gone = Vec::new();
                    for (room, members) in &mut self.rooms {
                        if let Some(i) = members.iter().position(|(p, _)| *p == notice.pid) {
                            let (_, nick) = members.remove(i);
                            gone.push((room.clone(), nick));
                        }
                    }
                    for (room, nick) in gone {
                        let why = format!("{nick} left ({:?})", notice.reason);
                        self.broadcast(out, &room, "hub", &why);
                    }
                }
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    }

    fn close(&mut self) {
        println!("[hub] closed with {} rooms", self.rooms.len());
    }
}

// ---------------------------------------------------------------------------

struct Session {
    nick: String,
    room: String,
    script: Vec<&'static str>,
    hub: Option<Pid>,
    heard: usize,
    buggy: bool,
}

impl Session {
    fn next_line(&mut self, out: &mut StepOutput<'_, Chat>) {
        if self.script.is_empty() {
            return out.idle();
        }
        // "Typing": a sleep on the runtime's timer wheel.
        out.sleep(
            TYPE,
            Duration::from_millis(5 + 3 * self.script.len() as u64),
        );
        out.block();
    }
}

impl Process<Chat> for Session {
    fn init(&mut self, method: &str, _input: Option<Chat>) -> Result<(), InitError> {
        match method {
            "connect" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: Events<'_, Chat>, out: &mut StepOutput<'_, Chat>) {
        let mut first = self.hub.is_none();
        for event in events {
            match event {
                Event::Completion { tag: JOIN, result } => {
                    if let Ok(Outcome::Reply(Chat::Size(n))) = result {
                        println!("[{}] joined #{} ({n} here)", self.nick, self.room);
                    }
                    self.next_line(out);
                }
                Event::Completion { tag: TYPE, .. } => {
                    let line = self.script.remove(0);
                    if self.buggy && self.script.len() == 1 {
                        panic!("{} tripped over its own keyboard", self.nick);
                    }
                    out.yield_command(
                        MODERATE,
                        Command::Custom {
                            kind: "moderate".into(),
                            input: Chat::Text(line.to_string()),
                        },
                    );
                    out.block();
                }
                Event::Completion {
                    tag: MODERATE,
                    result: Ok(Outcome::Value(v)),
                } => {
                    if let (Some(hub), Ok(text)) = (self.hub, v.downcast::<String>()) {
                        let say = Chat::Say {
                            room: self.room.clone(),
                            text: *text,
                        };
                        let _ = out.send(hub, say);
                    }
                    self.next_line(out);
                }
                Event::Message {
                    msg: Chat::Line { from, text },
                    ..
                } => {
                    self.heard += 1;
                    if from != self.nick {
                        println!("  {:>6} sees <{from}> {text}", self.nick);
                    }
                }
                Event::Exit(notice) => {
                    println!("[{}] hub is gone: {:?}", self.nick, notice.reason);
                    return out.complete(None);
                }
                Event::Cancel => {
                    if let Some(hub) = self.hub {
                        let bye = Chat::Say {
                            room: self.room.clone(),
                            text: "gotta go".into(),
                        };
                        let _ = out.send(hub, bye);
                    }
                    return out.complete(None);
                }
                _ => {}
            }
            first = false;
        }
        if first {
            // First step: find the hub, link to it, and join with a call.
            let Some(hub) = out.whereis("hub") else {
                return out.fail("no hub");
            };
            self.hub = Some(hub);
            out.link(hub);
            let join = Chat::Join {
                room: self.room.clone(),
                nick: self.nick.clone(),
            };
            out.call(JOIN, hub, join);
            out.block();
        }
    }

    fn close(&mut self) {
        println!("[{}] closed, heard {} lines", self.nick, self.heard);
    }
}

// ---------------------------------------------------------------------------

/// Spawns the sessions as its children, then reports how they ended.
struct Lobby {
    users: Vec<(&'static str, bool, Vec<&'static str>)>,
    ended: usize,
}

impl Process<Chat> for Lobby {
    fn init(&mut self, method: &str, input: Option<Chat>) -> Result<(), InitError> {
        match (method, input) {
            ("open", Some(Chat::Text(greeting))) => {
                println!("[lobby] {greeting}");
                Ok(())
            }
            ("open", _) => Err(InitError::Failed("a greeting is required".into())),
            (other, _) => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: Events<'_, Chat>, out: &mut StepOutput<'_, Chat>) {
        for (i, (nick, buggy, script)) in self.users.drain(..).enumerate() {
            let session = Session {
                nick: nick.to_string(),
                room: "rust".into(),
                script,
                hub: None,
                heard: 0,
                buggy,
            };
            out.spawn_child(100 + i as u64, session, "connect", None);
        }
        for event in events {
            match event {
                Event::Exit(n) if n.relation == Relation::Child => {
                    self.ended += 1;
                    println!("[lobby] session {} ended: {:?}", n.pid, n.reason);
                }
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    }

    fn close(&mut self) {
        println!("[lobby] closed after {} sessions ended", self.ended);
    }
}

fn main() {
    let rt = ProcessRuntime::<Chat>::builder()
        .workers(2)
        .handler("moderate", |req| {
            // An outside service: answers later, from its own thread.
            std::thread::spawn(move || {
                let Chat::Text(text) = req.input else { return };
                let clean = text.replace("darn", "d**n");
                let _ =
                    req.completer
                        .complete(req.pid, req.tag, Ok(Outcome::Value(Box::new(clean))));
            });
        })
        .build()
        .expect("runtime");

    let hub_opts = SpawnOptions {
        name: Some("hub".into()),
        mailbox_bound: Some(1024),
    };
    rt.spawn_with(hub_opts, Hub::default(), "serve", None)
        .expect("hub");
    let unknown = rt.spawn(Hub::default(), "listen", None);
    println!("spawning a hub at an unknown entry point: {unknown:?}");

    let lobby = Lobby {
        users: vec![
            (
                "ana",
                false,
                vec!["hi all", "anyone tried processes?", "darn, they are fast"],
            ),
            (
                "bo",
                false,
                vec!["hello", "yes: steps and mailboxes", "links too"],
            ),
            ("cy", true, vec!["hey", "watch this", "(never said)"]),
        ],
        ended: 0,
    };
    rt.spawn(lobby, "open", Some(Chat::Text("welcome to #rust".into())))
        .expect("lobby");

    std::thread::sleep(Duration::from_millis(300));
    let report = rt.shutdown(Duration::from_secs(2));
    println!(
        "shutdown: forced {:?}, stuck {:?}\n{:#?}",
        report.forced, report.stuck, report.metrics
    );
}
