//! PromQL lexer, parser, AST and printer (being written).
