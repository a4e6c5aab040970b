"""Example cosimrun plugin: a heated room model and the room_heating experiment."""
