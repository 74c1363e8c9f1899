fn main() { println!("tessera: not yet"); }
