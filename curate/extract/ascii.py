"""The ASCII characters the compiled scanners compare bytes and code points with, by name."""
NUL = 0
TAB = ord("\t")              # 9: str.isspace() holds \t \n \v \f \r (9-13) ...
NEWLINE = ord("\n")
CARRIAGE_RETURN = ord("\r")  # 13
FILE_SEPARATOR = 0x1C        # ... and \x1c-\x1f (28-31) and the space (32)
SPACE = ord(" ")
BANG = ord("!")
QUOTE = ord('"')
AMPERSAND = ord("&")
DASH = ord("-")
SLASH = ord("/")
DIGIT_0, DIGIT_9 = ord("0"), ord("9")
COLON = ord(":")
SEMICOLON = ord(";")
LT = ord("<")
EQUALS = ord("=")
GT = ord(">")
QUESTION = ord("?")
UPPER_A, UPPER_Z = ord("A"), ord("Z")
UNDERSCORE = ord("_")
LOWER_A, LOWER_Z = ord("a"), ord("z")
CASE_OFFSET = LOWER_A - UPPER_A  # upper-case ASCII letter + CASE_OFFSET: its lower case

