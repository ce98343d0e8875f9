package main

func int80()
