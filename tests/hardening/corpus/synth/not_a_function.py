synthesize = 42
