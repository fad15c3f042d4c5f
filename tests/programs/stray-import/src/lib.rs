//! A component that imports `stray:thing/clock`, which no host provides.

wit_bindgen::generate!({
    inline: "
        package stray:thing;
        interface clock { now: func() -> u64; }
        world stray { import clock; export run: func() -> u64; }
    ",
});

struct Stray;

impl Guest for Stray {
    fn run() -> u64 {
        stray::thing::clock::now()
    }
}

export!(Stray);
