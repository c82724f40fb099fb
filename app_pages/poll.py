"""Ask the class: students join a room here (the projector's QR code links to ?room=CODE); the session that
opened the room from an exercise sees the projector view. Everything is in ui.poll_room."""
from ui import poll_room

poll_room.room_page()
