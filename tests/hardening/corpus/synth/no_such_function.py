def synthesise(instance):
    return None
